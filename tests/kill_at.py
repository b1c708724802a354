"""Entry point for tests/test_train.py: the trainer, killed with SIGKILL from inside itself when it starts
its step number $KILL_AT_STEP (counted from 1). The kill lands at the same point of the run on any machine,
however fast or busy: no wall-clock window decides where the run dies."""
import os
import signal
import sys

import transformer.train as trainer

KILL_AT = int(os.environ["KILL_AT_STEP"])
run_step = trainer.train_step
started = 0


def train_step_or_die(*args, **kwargs):
    global started
    started += 1
    if started == KILL_AT:
        print(f"killing myself at step {KILL_AT}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)     # no cleanup, as with a crash or a pre-emption
    return run_step(*args, **kwargs)


trainer.train_step = train_step_or_die
trainer.main(sys.argv[1:])
