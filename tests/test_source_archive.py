"""The source archive the site offers ("Getting the code"): unpacked, it is worked in as a clone is, though
it holds no .git. `git archive` stamps its COMMIT file with the commit, and the tools that name the code's
commit read it there."""
import shutil
import subprocess
import sys
import tarfile

import pytest

from tests.conftest import REPO


def git(*args):
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory):
    """HEAD as `git archive` gives it (what tools/site_downloads.py packs), unpacked without .git."""
    if not (REPO / ".git").exists():
        pytest.skip("this tree is itself an unpacked archive")
    tmp = tmp_path_factory.mktemp("archive")
    git("archive", "--format=tar", "--prefix=tree/", "-o", str(tmp / "source.tar"), "HEAD")
    shutil.unpack_archive(tmp / "source.tar", tmp)
    return tmp / "tree"


def test_the_archive_names_its_commit(unpacked):
    head = git("rev-parse", "HEAD").strip()
    assert (unpacked / "COMMIT").read_text().strip() == head and not (unpacked / ".git").exists()
    probe = ("import sys; sys.path.insert(0, '.'); from transformer.runlog import git_commit; "
             "print(git_commit())")
    named = subprocess.run([sys.executable, "-c", probe], cwd=unpacked, capture_output=True, text=True,
                           env={"PATH": "/nonexistent"}, timeout=120)    # no git to ask
    assert named.stdout.strip() == head, named.stderr


def test_the_site_s_downloads_are_made_in_the_archive_without_git(unpacked, tmp_path):
    """make book's last step, tools/site_downloads.py, called git and stopped an unpacked archive's build:
    without .git it packs the tree itself and names the commit COMMIT holds."""
    head = git("rev-parse", "HEAD").strip()
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("<html></html>")
    done = subprocess.run([sys.executable, str(unpacked / "tools" / "site_downloads.py"), str(site)],
                          cwd=unpacked, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"# commit {head}\n" in (site / "downloads" / "SHA256SUMS").read_text()
    with tarfile.open(site / "downloads" / "transformer-source.tar.gz") as tar:
        names = tar.getnames()
    top = f"transformer-{head[:12]}"
    assert all(n == top or n.startswith(top + "/") for n in names)
    assert f"{top}/COMMIT" in names and f"{top}/book/index.ipynb" in names
    assert not any("/.git/" in n or "/_build/" in n or n.endswith(".mo") for n in names)
