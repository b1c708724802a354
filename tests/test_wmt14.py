"""Offline tests for the WMT14 en-de download/prepare code.

Every archive is built here, in tmp_path, with the member paths and file
formats of the real statmt.org archives, and served through file:// URLs.
"""

from __future__ import annotations

import hashlib
import io
import random
import re
import shutil
import tarfile
import urllib.request
from pathlib import Path

import pytest

import transformer.corpora as wmt14
from transformer.corpora import (
    WMT14_SOURCES,
    ArchiveError,
    download,
    extract_member,
    prepare_wmt14,
    sgm_to_text,
)

# ---------------------------------------------------------------- fixtures --

# Training text as raw bytes, with the quirks the real corpora have: empty
# lines (Europarl), CRLF endings (Common Crawl), U+2028 / U+0085 inside a line
# (must not split it), a last line without a newline.
EUROPARL_EN = b"Resumption of the session\n\nI declare resumed the session.\n"
EUROPARL_DE = "Wiederaufnahme der Sitzungsperiode\n\nIch erkl\u00e4re die Sitzung f\u00fcr wiederaufgenommen.\n".encode()
CC_EN = "Graphical artwork, corporate identity.\r\nA\u2028B stays one line\r\nthird\r\nfour\r\n".encode()
CC_DE = "Grafische Gestaltung, Corporate Identity.\r\nA\u0085B bleibt eine Zeile\r\ndritte\r\nvier\r\n".encode()
NC_EN = b"$10,000 Gold?\nSAN FRANCISCO - It has never been easy."
NC_DE = "$10.000 Gold?\nSAN FRANCISCO \u2013 Es war nie leicht.".encode()

TRAIN_EN = [
    "Resumption of the session", "", "I declare resumed the session.",
    "Graphical artwork, corporate identity.", "A\u2028B stays one line", "third", "four",
    "$10,000 Gold?", "SAN FRANCISCO - It has never been easy.",
]
TRAIN_DE = [
    "Wiederaufnahme der Sitzungsperiode", "", "Ich erkl\u00e4re die Sitzung f\u00fcr wiederaufgenommen.",
    "Grafische Gestaltung, Corporate Identity.", "A\u0085B bleibt eine Zeile", "dritte", "vier",
    "$10.000 Gold?", "SAN FRANCISCO \u2013 Es war nie leicht.",
]

DEV_EN = b"A Republican strategy to counter the re-election of Obama\nRepublican leaders justified their policy.\n"
DEV_DE = "Eine republikanische Strategie gegen die Wiederwahl von Obama\nDie F\u00fchrungskr\u00e4fte der Republikaner rechtfertigen ihre Politik.\n".encode()

SRC_SGM = """<srcset setid="newstest2014" srclang="any">
<doc sysid="ref" docid="1012-bbc" genre="news" origlang="en">
<p>
<seg id="1">Gutach: Increased safety for pedestrians</seg>
<seg id="2">They are not even 100 metres apart:   On Tuesday, the new B 33 lights.</seg>
</p>
</doc>
<doc sysid="ref" docid="1015-spiegel" genre="news" origlang="de">
<p>
<seg id="1">  Two\tsets of lights &amp; an &quot;error&quot;?  </seg>\r
</p>
</doc>
</srcset>
""".encode()
REF_SGM = """<refset setid="newstest2014" srclang="any" trglang="de">
<doc sysid="ref" docid="1012-bbc" genre="news" origlang="en">
<p>
<seg id="1">Gutach: Noch mehr Sicherheit f\u00fcr Fu\u00dfg\u00e4nger</seg>
<seg id="2">Sie stehen keine 100 Meter voneinander entfernt: Am Dienstag ist in Gutach die neue B 33 in Betrieb genommen worden.</seg>
</p>
</doc>
<doc sysid="ref" docid="1015-spiegel" genre="news" origlang="de">
<p>
<seg id="1">Zwei Ampeln &amp; ein &quot;Fehler&quot;?</seg>
</p>
</doc>
</refset>
""".encode()
TEST_EN = [
    "Gutach: Increased safety for pedestrians",
    "They are not even 100 metres apart: On Tuesday, the new B 33 lights.",
    "Two sets of lights &amp; an &quot;error&quot;?",
]
TEST_DE = [
    "Gutach: Noch mehr Sicherheit f\u00fcr Fu\u00dfg\u00e4nger",
    "Sie stehen keine 100 Meter voneinander entfernt: Am Dienstag ist in Gutach die neue B 33 in Betrieb genommen worden.",
    "Zwei Ampeln &amp; ein &quot;Fehler&quot;?",
]


def build_tgz(path: Path, members: dict[str, bytes], dirs=()) -> Path:
    """Write a .tgz holding ``members`` (name -> bytes), in that order."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for d in dirs:
            info = tarfile.TarInfo(d)
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            tar.addfile(info)
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def archive_members(**overrides) -> dict[str, tuple[dict[str, bytes], tuple]]:
    """Per source key: the members (real paths, plus neighbours) and folders."""
    layout = {
        "europarl_v7": ({
            "training/europarl-v7.cs-en.cs": b"Obnoveni zasedani\n",
            "training/europarl-v7.cs-en.en": b"Resumption of the session\n",
            "training/europarl-v7.de-en.de": EUROPARL_DE,
            "training/europarl-v7.de-en.en": EUROPARL_EN,
            "training/europarl-v7.fr-en.fr": b"Reprise de la session\n",
        }, ("training/",)),
        "commoncrawl": ({
            "commoncrawl.cs-en.annotation": b"x\n",
            "commoncrawl.de-en.annotation": b"a\nb\nc\nd\n",
            "commoncrawl.de-en.de": CC_DE,
            "commoncrawl.de-en.en": CC_EN,
            "commoncrawl.fr-en.fr": b"y\n",
        }, ()),
        "news_commentary_v9": ({
            "training/news-commentary-v9.cs-en.cs": b"z\n",
            "training/news-commentary-v9.de-en.de": NC_DE,
            "training/news-commentary-v9.de-en.en": NC_EN,
        }, ("training/",)),
        "dev": ({
            "dev/newstest2012.de": b"alt\n",
            "dev/newstest2013-src.en.sgm": b'<srcset setid="newstest2013">\n',
            "dev/newstest2013.de": DEV_DE,
            "dev/newstest2013.en": DEV_EN,
        }, ("dev/",)),
        "test": ({
            "test-full/newstest2014-deen-ref.de.sgm": REF_SGM,
            "test-full/newstest2014-deen-ref.en.sgm": SRC_SGM.replace(b"srcset", b"refset"),
            "test-full/newstest2014-deen-src.de.sgm": REF_SGM.replace(b"refset", b"srcset"),
            "test-full/newstest2014-deen-src.en.sgm": SRC_SGM,
        }, ("test-full/",)),
    }
    for key, members in overrides.items():
        files, dirs = layout[key]
        files = {**files, **members}
        layout[key] = ({k: v for k, v in files.items() if v is not None}, dirs)
    return layout


def serve(server: Path, **overrides) -> dict[str, str]:
    """Build all five archives under ``server``; return key -> file:// URL."""
    urls = {}
    for key, (files, dirs) in archive_members(**overrides).items():
        name = WMT14_SOURCES[key]["url"].rsplit("/", 1)[-1]
        urls[key] = build_tgz(server / name, files, dirs).as_uri()
    return urls


def read_lines(path: Path) -> list[str]:
    data = path.read_bytes()
    assert data.endswith(b"\n") or data == b""
    return data.decode("utf-8").split("\n")[:-1]


def leftovers(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(".part") or p.name.startswith("extract-")]


@pytest.fixture
def urls(tmp_path):
    return serve(tmp_path / "server")


# ------------------------------------------------------------------- tests --


def test_sources_table_has_the_real_urls_and_member_paths():
    expected = {
        "europarl_v7": ("http://statmt.org/wmt13/training-parallel-europarl-v7.tgz",
                        "training/europarl-v7.de-en.en", "training/europarl-v7.de-en.de"),
        "commoncrawl": ("http://statmt.org/wmt13/training-parallel-commoncrawl.tgz",
                        "commoncrawl.de-en.en", "commoncrawl.de-en.de"),
        "news_commentary_v9": ("http://statmt.org/wmt14/training-parallel-nc-v9.tgz",
                               "training/news-commentary-v9.de-en.en", "training/news-commentary-v9.de-en.de"),
        "dev": ("http://statmt.org/wmt14/dev.tgz", "dev/newstest2013.en", "dev/newstest2013.de"),
        "test": ("http://statmt.org/wmt14/test-full.tgz",
                 "test-full/newstest2014-deen-src.en.sgm", "test-full/newstest2014-deen-ref.de.sgm"),
    }
    assert {k: (v["url"], v["en"], v["de"]) for k, v in WMT14_SOURCES.items()} == expected
    assert wmt14.TRAIN_KEYS == ("europarl_v7", "commoncrawl", "news_commentary_v9")


def test_prepare_writes_exact_outputs(tmp_path, urls):
    root = tmp_path / "cache"
    out = prepare_wmt14(root, urls=urls, progress=False)
    d = root / "wmt14-en-de"
    assert out == {f"{s}.{l}": d / f"{s}.{l}"
                   for s in ("train", "newstest2013", "newstest2014") for l in ("en", "de")}
    assert read_lines(out["train.en"]) == TRAIN_EN
    assert read_lines(out["train.de"]) == TRAIN_DE
    assert out["newstest2013.en"].read_bytes() == DEV_EN
    assert out["newstest2013.de"].read_bytes() == DEV_DE
    assert read_lines(out["newstest2014.en"]) == TEST_EN
    assert read_lines(out["newstest2014.de"]) == TEST_DE
    # The archives are kept (named as upstream) and nothing temporary is left.
    assert sorted(p.name for p in (d / "downloads").iterdir()) == sorted(
        [v["url"].rsplit("/", 1)[-1] for v in WMT14_SOURCES.values()] + ["checksums.json"])
    assert leftovers(root) == []


def test_second_call_downloads_nothing(tmp_path, urls, monkeypatch):
    root = tmp_path / "cache"
    first = prepare_wmt14(root, urls=urls, progress=False)
    contents = {k: p.read_bytes() for k, p in first.items()}
    shutil.rmtree(tmp_path / "server")
    shutil.rmtree(root / "wmt14-en-de" / "downloads")

    def no_download(*args, **kwargs):
        raise AssertionError(f"unexpected download {args}")

    monkeypatch.setattr(wmt14, "download", no_download)
    second = prepare_wmt14(root, urls=urls, progress=False)
    assert second == first
    assert {k: p.read_bytes() for k, p in second.items()} == contents


def test_existing_test_sets_only_fetch_training_archives(tmp_path):
    urls = serve(tmp_path / "server")
    # dev.tgz and test-full.tgz are not even available.
    (tmp_path / "server" / "dev.tgz").unlink()
    (tmp_path / "server" / "test-full.tgz").unlink()
    d = tmp_path / "cache" / "wmt14-en-de"
    d.mkdir(parents=True)
    for name in ("newstest2013.en", "newstest2013.de", "newstest2014.en", "newstest2014.de"):
        (d / name).write_text(f"kept {name}\n", encoding="utf-8")

    out = prepare_wmt14(tmp_path / "cache", urls=urls, progress=False)
    assert sorted(p.name for p in (d / "downloads").iterdir()) == ["checksums.json",
        "training-parallel-commoncrawl.tgz", "training-parallel-europarl-v7.tgz", "training-parallel-nc-v9.tgz"]
    assert read_lines(out["train.en"]) == TRAIN_EN
    assert out["newstest2014.de"].read_text(encoding="utf-8") == "kept newstest2014.de\n"


def test_misaligned_source_is_named_and_nothing_is_written(tmp_path):
    urls = serve(tmp_path / "server", commoncrawl={"commoncrawl.de-en.de": CC_DE + b"extra\r\n"})
    root = tmp_path / "cache"
    with pytest.raises(ValueError) as err:
        prepare_wmt14(root, urls=urls, progress=False)
    msg = str(err.value)
    assert "training-parallel-commoncrawl.tgz:commoncrawl.de-en.en has 4 lines" in msg
    assert "training-parallel-commoncrawl.tgz:commoncrawl.de-en.de has 5 lines" in msg
    d = root / "wmt14-en-de"
    assert not (d / "train.en").exists() and not (d / "train.de").exists()
    assert leftovers(root) == []


def test_missing_member_names_archive_member_and_lists_others(tmp_path):
    urls = serve(tmp_path / "server", news_commentary_v9={"training/news-commentary-v9.de-en.de": None})
    with pytest.raises(ArchiveError) as err:
        prepare_wmt14(tmp_path / "cache", urls=urls, progress=False)
    msg = str(err.value)
    assert isinstance(err.value, RuntimeError)
    assert "training-parallel-nc-v9.tgz has no member training/news-commentary-v9.de-en.de" in msg
    assert "training/news-commentary-v9.de-en.en" in msg  # a member that is there
    assert not (tmp_path / "cache" / "wmt14-en-de" / "train.en").exists()
    assert leftovers(tmp_path / "cache") == []


def make_corrupt(kind: str, path: Path) -> None:
    # The wanted member sits last, behind incompressible filler, so a cut in
    # the middle of the archive really cuts into (or before) it.
    filler = random.Random(0).randbytes(64 * 1024)
    build_tgz(path, {"filler.bin": filler, "dev/newstest2013.en": DEV_EN}, ("dev/",))
    data = path.read_bytes()
    if kind == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif kind == "garbage":
        path.write_bytes(b"<html>503 Service Unavailable</html>\n" * 20)
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "bad-gzip-body":
        path.write_bytes(data[:20] + bytes(len(data) - 20))


@pytest.mark.parametrize("kind", ["truncated", "garbage", "empty", "bad-gzip-body"])
def test_corrupt_archive_says_delete_and_redownload(tmp_path, kind):
    archive = tmp_path / "dev.tgz"
    make_corrupt(kind, archive)
    dest = tmp_path / "out" / "newstest2013.en"
    with pytest.raises(ArchiveError) as err:
        extract_member(archive, "dev/newstest2013.en", dest)
    msg = str(err.value)
    assert str(archive) in msg and "corrupt or truncated" in msg
    assert "Delete it" in msg and "re-download" in msg
    assert not dest.exists()
    assert leftovers(tmp_path) == []


def test_corrupt_archive_through_prepare(tmp_path, urls):
    make_corrupt("truncated", tmp_path / "server" / "dev.tgz")
    with pytest.raises(ArchiveError, match=r"dev\.tgz is corrupt or truncated.*Delete it"):
        prepare_wmt14(tmp_path / "cache", urls=urls, progress=False)


def test_extract_member_accepts_dot_slash_names(tmp_path):
    archive = build_tgz(tmp_path / "dev.tgz", {"./dev/newstest2013.en": DEV_EN})
    dest = extract_member(archive, "dev/newstest2013.en", tmp_path / "x" / "n.en")
    assert dest.read_bytes() == DEV_EN


def test_undecodable_bytes_report_member_and_line(tmp_path):
    bad = b"Resumption of the session\n\nI declare \xff resumed.\n"
    urls = serve(tmp_path / "server", europarl_v7={"training/europarl-v7.de-en.en": bad})
    with pytest.raises(ValueError) as err:
        prepare_wmt14(tmp_path / "cache", urls=urls, progress=False)
    msg = str(err.value)
    assert "training-parallel-europarl-v7.tgz:training/europarl-v7.de-en.en: line 3 is not valid UTF-8" in msg
    assert not (tmp_path / "cache" / "wmt14-en-de" / "train.en").exists()


def test_undecodable_bytes_in_sgm(tmp_path):
    sgm = tmp_path / "x.sgm"
    sgm.write_bytes(b'<refset>\n<doc docid="a" sysid="ref">\n<seg id="1">ok</seg>\n<seg id="2">caf\xe9</seg>\n')
    with pytest.raises(ValueError, match=r"x\.sgm: line 4 is not valid UTF-8"):
        sgm_to_text(sgm, tmp_path / "x.txt")
    assert not (tmp_path / "x.txt").exists()


def sacrebleu_convert(lines):
    # sacrebleu's FakeSGMLDataset._convert_format and Dataset._clean, verbatim logic.
    for line in lines:
        if line.startswith("<seg "):
            line = re.sub(r"<seg.*?>(.*)</seg>.*?", "\\1", line)
            yield re.sub(r"\s+", " ", line.strip())


def test_sgm_to_text_matches_sacrebleu(tmp_path):
    text = (
        '<srcset setid="newstest2014" srclang="any">\n'
        '<doc sysid="ref" docid="1" genre="news" origlang="en">\n'
        "<p>\n"
        '<seg id="1">  a \t b\u00a0 c  </seg>\n'
        '<seg id="2">x &amp; y &lt;z&gt;</seg> trailing\n'
        '<seg id="3"></seg>\n'
        ' <seg id="4">indented: dropped, as in sacrebleu</seg>\n'
        "</p>\n</doc>\n</srcset>\n"
    )
    sgm = tmp_path / "t.sgm"
    sgm.write_text(text, encoding="utf-8")
    n = sgm_to_text(sgm, tmp_path / "t.txt")
    got = read_lines(tmp_path / "t.txt")
    # sacrebleu's "</seg>.*?" is lazy, so text after </seg> survives.
    assert got == ["a b c", "x &amp; y &lt;z&gt; trailing", ""]
    assert got == list(sacrebleu_convert(text.splitlines(keepends=True)))
    assert n == 3


def test_unreachable_url_raises_naming_url_and_destination(tmp_path):
    url = (tmp_path / "nowhere" / "training-parallel-europarl-v7.tgz").as_uri()
    with pytest.raises(RuntimeError) as err:
        prepare_wmt14(tmp_path / "cache", urls={"europarl_v7": url}, progress=False)
    msg = str(err.value)
    dest = tmp_path / "cache" / "wmt14-en-de" / "downloads" / "training-parallel-europarl-v7.tgz"
    assert url in msg and str(dest) in msg and "by hand" in msg
    assert not dest.exists()
    assert leftovers(tmp_path / "cache") == []


def test_unknown_url_key_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="unknown source keys"):
        prepare_wmt14(tmp_path, urls={"europarl": "file:///x"}, progress=False)


def test_download_file_url_then_skip_existing(tmp_path, monkeypatch):
    src = tmp_path / "src.bin"
    src.write_bytes(b"payload" * 1000)
    dest = tmp_path / "dl" / "file.bin"
    assert download(src.as_uri(), dest, progress=False) == dest
    assert dest.read_bytes() == src.read_bytes()

    def fail(*a, **k):
        raise AssertionError("must not open the URL again")

    monkeypatch.setattr(urllib.request, "urlopen", fail)
    assert download(src.as_uri(), dest, progress=False) == dest


class BrokenResponse:
    """A urlopen() result that delivers one chunk, then fails like a dropped link."""

    def __init__(self, error, length="2000000"):
        self.headers = {"Content-Length": length}
        self.error = error
        self.calls = 0

    def read(self, n):
        self.calls += 1
        if self.calls == 1:
            return b"x" * 1000
        if self.error is None:
            return b""
        raise self.error

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("error", [ConnectionResetError("reset by peer"), None])
def test_interrupted_download_leaves_no_final_file(tmp_path, monkeypatch, error):
    # error=None: the server closes early, short of Content-Length.
    monkeypatch.setattr(urllib.request, "urlopen", lambda *a, **k: BrokenResponse(error))
    dest = tmp_path / "dl" / "big.tgz"
    with pytest.raises(RuntimeError, match=r"could not download http://example\.invalid/big\.tgz"):
        download("http://example.invalid/big.tgz", dest, progress=False)
    assert not dest.exists()
    assert list(dest.parent.iterdir()) == []          # no temporary file left either


def test_killed_download_then_retry(tmp_path, monkeypatch):
    monkeypatch.setattr(urllib.request, "urlopen", lambda *a, **k: BrokenResponse(KeyboardInterrupt()))
    dest = tmp_path / "dl" / "big.tgz"
    with pytest.raises(KeyboardInterrupt):
        download("http://example.invalid/big.tgz", dest, progress=False)
    assert list(dest.parent.iterdir()) == []
    # A hard kill (SIGKILL) can leave a temporary file behind; it must not count as done, and a file
    # that merely has a temporary-looking name is not the downloader's to take or delete.
    stale = dest.with_name(".big.tgz.abcd1234.part")
    stale.write_bytes(b"stale")
    monkeypatch.undo()
    src = tmp_path / "big.tgz"
    src.write_bytes(b"complete")
    download(src.as_uri(), dest, progress=False)
    assert dest.read_bytes() == b"complete"
    assert sorted(dest.parent.iterdir()) == sorted([dest, stale]) and stale.read_bytes() == b"stale"


# --------------------------------------------------------------- checksums --

def test_published_checksums_are_the_tfds_values_for_the_three_training_archives():
    assert set(wmt14.PUBLISHED_CHECKSUMS) == set(wmt14.TRAIN_KEYS)
    assert wmt14.PUBLISHED_CHECKSUMS["news_commentary_v9"][0] == 80418416


def test_a_checksum_is_recorded_at_the_first_download_and_checked_after(tmp_path):
    path, record = tmp_path / "archive.tgz", tmp_path / "checksums.json"
    path.write_bytes(b"the bytes of the first download")
    size, sha = wmt14.verify_download(path, record=record)
    assert size == 31 and sha == hashlib.sha256(b"the bytes of the first download").hexdigest()
    assert wmt14.verify_download(path, record=record) == (size, sha)      # same file: accepted
    path.write_bytes(b"the bytes of another file!!!!!!")                   # same size, other content
    with pytest.raises(wmt14.DownloadError, match=r"archive.tgz has 31 bytes and SHA-256 .* recorded at its first"):
        wmt14.verify_download(path, record=record)


def test_a_published_checksum_that_does_not_match_stops_the_preparation(tmp_path, urls, monkeypatch):
    monkeypatch.setattr(wmt14, "PUBLISHED_CHECKSUMS", {"europarl_v7": (1, "0" * 64)})
    canonical = {k: v for k, v in urls.items() if k != "europarl_v7"}   # europarl from the canonical name
    downloads = tmp_path / "cache" / "wmt14-en-de" / "downloads"
    downloads.mkdir(parents=True)
    shutil.copy(urls["europarl_v7"].removeprefix("file://"), downloads / "training-parallel-europarl-v7.tgz")
    with pytest.raises(wmt14.DownloadError, match=r"the published checksum is 1 bytes"):
        prepare_wmt14(tmp_path / "cache", urls=canonical, progress=False)
    assert not (tmp_path / "cache" / "wmt14-en-de" / "train.en").exists()
