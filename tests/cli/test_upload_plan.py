"""Which path each file gets in the knowledge base (kbcli.upload.collect and Plan): no
stack needed, the files are local."""
import hashlib
from pathlib import Path

import pytest

from kbcli.client import CliError
from kbcli.upload import Plan, clean_prefix, collect, sha256_of


def tree(root: Path, *names: str) -> Path:
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(f"<h1>{name}</h1>")
    return root


def mapping(sources) -> list[tuple[str, str]]:
    return [(s.remote, s.local.name) for s in sources]


def test_a_folder_keeps_paths_relative_to_it(tmp_path):
    site = tree(tmp_path / "site", "a/index.html", "b/index.html", "index.html", ".git/config", "b/.draft.md")
    assert sorted(s.remote for s in collect([str(site)], [], [], recursive=True)) == [
        "a/index.html", "b/index.html", "index.html"]
    assert sorted(s.remote for s in collect([str(site)], [], [], "docs/v2", recursive=True)) == [
        "docs/v2/a/index.html", "docs/v2/b/index.html", "docs/v2/index.html"]


def test_a_file_named_goes_under_its_own_name(tmp_path):
    site = tree(tmp_path / "site", "a/index.html", "b/guide.md")
    assert mapping(collect([str(site / "a" / "index.html")], [], [], recursive=False)) == [
        ("index.html", "index.html")]
    assert mapping(collect([str(site / "b" / "guide.md")], [], [], "notes", recursive=False)) == [
        ("notes/guide.md", "guide.md")]


def test_a_folder_without_recursive_is_refused_with_the_hint(tmp_path):
    site = tree(tmp_path / "site", "a/index.html", "top.md")
    for given, folder in ((str(site), site), (str(site / "*"), site / "a")):
        with pytest.raises(CliError) as refused:
            collect([given], [], [], recursive=False)
        assert refused.value.code == "IS_A_FOLDER" and refused.value.exit_code == 2
        assert f"{folder} is a folder: add -r (--recursive)" in refused.value.message
    assert [s.remote for s in collect([str(site / "*.md")], [], [], recursive=False)] == ["top.md"]


def test_a_glob_maps_files_by_name_and_folders_relative_to_themselves(tmp_path):
    site = tree(tmp_path / "site", "v1/a/index.html", "v1/b.md", "v2/a/index.html", "top.md")
    # Files matched: their own names.
    assert sorted(s.remote for s in collect([str(site / "*.md")], [], [], recursive=True)) == ["top.md"]
    # Folders matched: walked, each one's files relative to it.
    sources = collect([str(site / "v*")], [], [], recursive=True)
    assert sorted(s.remote for s in sources) == ["a/index.html", "a/index.html", "b.md"]


def test_two_files_for_one_path_refuse_the_later_naming_both(tmp_path):
    site = tree(tmp_path / "site", "v1/a/index.html", "v2/a/index.html")
    plan = Plan.of(collect([str(site / "v1"), str(site / "v2")], [], [], recursive=True))
    first, second = plan.items
    assert first.error is None and first.source.remote == "a/index.html"
    assert second.error["code"] == "DUPLICATE_PATH"
    assert str(site / "v1" / "a" / "index.html") in second.error["message"]
    assert str(site / "v2" / "a" / "index.html") in second.error["message"]
    assert plan.to_send == [first]
    assert second.as_dict()["result"] == "failed" and second.as_dict()["path"] == "a/index.html"


def test_the_same_file_twice_at_one_path_counts_once(tmp_path):
    site = tree(tmp_path / "site", "index.html")
    sources = collect([str(site), str(site / "index.html"), str(site / "*.html")], [], [], recursive=True)
    assert mapping(sources) == [("index.html", "index.html")]
    assert Plan.of(sources).items[0].error is None


def test_same_name_in_different_folders_is_no_longer_a_conflict(tmp_path):
    site = tree(tmp_path / "site", "a/README.md", "b/README.md")
    plan = Plan.of(collect([str(site)], [], [], recursive=True))
    assert [i.error for i in plan.items] == [None, None]
    assert [i.as_dict()["path"] for i in plan.items] == ["a/README.md", "b/README.md"]
    assert plan.items[0].as_dict()["localPath"] == str(site / "a" / "README.md")


def test_include_and_exclude_match_below_the_folder_not_the_prefix(tmp_path):
    site = tree(tmp_path / "site", "a/index.html", "a/skip.md", "b/index.html")
    sources = collect([str(site)], ["a/*"], ["*.md"], "docs", recursive=True)
    assert [s.remote for s in sources] == ["docs/a/index.html"]


@pytest.mark.parametrize("given, expected", [(None, ""), ("", ""), ("docs", "docs"), ("/docs/v2/", "docs/v2"),
                                             ("docs//v2", "docs/v2"), ("docs\\v2", "docs/v2")])
def test_prefix_is_a_folder(given, expected):
    assert clean_prefix(given) == expected


@pytest.mark.parametrize("given", ["..", "docs/../x", "./docs"])
def test_prefix_outside_the_knowledge_base_is_a_usage_error(given):
    with pytest.raises(CliError) as raised:
        clean_prefix(given)
    assert raised.value.code == "INVALID_OPTION" and raised.value.exit_code == 2


def test_sha256_is_of_the_bytes(tmp_path):
    data = bytes(range(256)) * 5000  # more than one read block
    (tmp_path / "f.bin").write_bytes(data)
    assert sha256_of(tmp_path / "f.bin") == hashlib.sha256(data).hexdigest()
