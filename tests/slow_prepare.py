"""torchrun entry point for tests/test_train.py: the trainer, with a data preparation that takes longer
than the process group's timeout (as learning BPE on 4.5M pairs takes longer than NCCL's 10 minutes)."""
import datetime
import sys
import time

import transformer.distributed as distributed
import transformer.run as run
import transformer.train as trainer

SLOW_S, TIMEOUT_S = 6, 3
distributed.DIST_TIMEOUT = datetime.timedelta(seconds=TIMEOUT_S)
learn_bpe = run.train_vocab


def slow_train_vocab(*args, **kwargs):
    print(f"slow preparation: {SLOW_S} s, process group timeout {TIMEOUT_S} s", flush=True)
    time.sleep(SLOW_S)
    return learn_bpe(*args, **kwargs)


run.train_vocab = slow_train_vocab
trainer.main(sys.argv[1:])
