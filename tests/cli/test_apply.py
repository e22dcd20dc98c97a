"""`kb apply -f` and `kb export` (issue 28, seed 004's knowledge/v1 definitions) and `make
up`'s autoload of a project's knowledge/ and agents/ folders, against the running stack as a
fresh organisation whose first user is its admin."""
import secrets
import sys

import pytest
import yaml

from tests.cli.conftest import Cli, clean_env
from tests.conftest import ROOT
from tests.e2e.conftest import new_key

# The seed's knowledge base verbatim (but its name and provider: openai is out of reach here),
# and an agent whose knowledge tool has the seed's QueryConfig, mode and token allocation.
KB_YAML = """\
apiVersion: knowledge/v1
kind: KnowledgeBase
metadata:
  id: research-docs
spec:
  description: "Technical research documents"
  embedding_provider: local
  vector_store: weaviate-research
  chunking:
    strategy: semantic
    max_chunk_size: 1000
    overlap: 200
  access:
    read_roles: ["researcher", "engineer"]
    write_roles: ["researcher"]
"""
AGENT_YAML = """\
apiVersion: knowledge/v1
kind: Agent
metadata:
  id: research-agent
spec:
  description: Answers from the research documents
  knowledge:
    - knowledge_base: research-docs
      mode: read-write
      token_allocation: 0.25
      query: {max_results: 8, similarity_threshold: 0.35, retrieval_strategy: hybrid}
"""


@pytest.fixture(scope="module")
def admin(local_env, tmp_path_factory) -> Cli:
    key = new_key(local_env, f"cli-apply-{secrets.token_hex(4)}", "ada")
    return Cli(env=clean_env(KB_API_URL=local_env["KB_API_URL"], KB_API_KEY=key),
               cwd=tmp_path_factory.mktemp("apply-cwd"))


def _project(root, kb_yaml=KB_YAML, agent_yaml=AGENT_YAML):
    (root / "knowledge").mkdir(parents=True, exist_ok=True)
    (root / "agents").mkdir(exist_ok=True)
    (root / "knowledge" / "research.yaml").write_text(kb_yaml)
    (root / "agents" / "research-agent.yaml").write_text(agent_yaml)
    return root


def test_apply_creates_then_changes_nothing_and_export_applies_unchanged(admin, tmp_path):
    project = _project(tmp_path / "project")
    first = admin.json("apply", "-f", str(project / "knowledge"), "-f", str(project / "agents"))
    assert [(c["kind"], c["name"], c["action"]) for c in first] == [
        ("knowledgebase", "research-docs", "created"), ("agent", "research-agent", "created"),
        ("tool", "research-agent/research-docs", "created")]
    kb = next(k for k in admin.json("kbs", "list")["items"] if k["name"] == "research-docs")
    assert kb["visibility"] == "org" and kb["chunking"] == {"chunkTokens": 1000, "chunkOverlap": 200, "strategy": "semantic"}
    assert kb["access"] == {"readRoles": ["engineer", "researcher"], "readUsers": None,
                            "writeRoles": ["researcher"], "writeUsers": None}
    agent = next(a for a in admin.json("agents", "list")["items"] if a["name"] == "research-agent")
    tool = next(t for t in agent["availableTools"] if t["type"] == "knowledge_base")
    config = tool["config"]
    assert (config["knowledgeBaseId"], config["mode"], config["defaultTopK"], config["defaultMinScore"],
            config["strategy"], config["maxTokens"]) == (kb["id"], "read-write", 8, 0.35, "hybrid", 2000)

    again = admin.json("apply", "-f", str(project))
    assert {c["action"] for c in again} == {"unchanged"}, again

    # A change to what may change is applied, and said; the rest stays.
    _project(project, KB_YAML.replace("Technical research documents", "Research, peer reviewed"),
             AGENT_YAML.replace("max_results: 8", "max_results: 3"))
    changed = {(c["kind"], c["action"], c["detail"]) for c in admin.json("apply", "-f", str(project))}
    assert changed == {("knowledgebase", "configured", "description"), ("agent", "unchanged", ""),
                       ("tool", "configured", "defaultTopK")}

    exported = admin.run("export").stdout
    documents = list(yaml.safe_load_all(exported))
    assert {(d["kind"], d["metadata"]["id"]) for d in documents} >= {("KnowledgeBase", "research-docs"),
                                                                   ("Agent", "research-agent")}
    (tmp_path / "exported.yaml").write_text(exported)
    assert {c["action"] for c in admin.json("apply", "-f", str(tmp_path / "exported.yaml"))} == {"unchanged"}
    written = admin.json("export", "-o", str(tmp_path / "out"))["written"]
    assert str(tmp_path / "out" / "knowledge" / "research-docs.yaml") in written


def test_what_cannot_be_applied_is_said_before_or_instead_of_a_change(admin, tmp_path):
    bad = tmp_path / "bad.yaml"
    for text, field in (("apiVersion: knowledge/v2\nkind: KnowledgeBase\nmetadata: {id: x}\n", "apiVersion"),
                        ("apiVersion: knowledge/v1\nkind: Pipeline\nmetadata: {id: x}\n", "kind"),
                        ("apiVersion: knowledge/v1\nkind: KnowledgeBase\nmetadata: {id: x}\nspec: {chunk: 1}\n",
                         "spec.chunk"),
                        (AGENT_YAML.replace("token_allocation: 0.25", "token_allocation: 2"), "token_allocation"),
                        ("apiVersion: knowledge/v1\nkind: KnowledgeBase\nmetadata: {id: [x\n", "bad.yaml")):
        bad.write_text(text)
        assert field in admin.error("apply", "-f", str(bad), code="INVALID_MANIFEST", expect=2)["message"]
    # The chunking of an existing knowledge base is fixed: reported, exit 1, nothing else changed.
    _project(tmp_path / "p")
    admin.json("apply", "-f", str(tmp_path / "p"))
    (tmp_path / "p" / "knowledge" / "research.yaml").write_text(KB_YAML.replace("1000", "400"))
    done = admin.run("apply", "-f", str(tmp_path / "p"), "--json", expect=1)
    failed = [c for c in yaml.safe_load(done.stdout) if c["action"] == "failed"]
    assert [c["name"] for c in failed] == ["research-docs"] and "max_chunk_size is 1000 here, 400" in failed[0]["detail"]


def test_make_up_autoloads_a_projects_definitions(local_env, tmp_path, capsys):
    """The same function `make up` calls after the demo (localstack/stack.py autoload), on a
    project with the seed's compozy.yaml."""
    project = _project(tmp_path / "project")
    (project / "compozy.yaml").write_text("autoload:\n  enabled: true\n  include:\n"
                                          "    - \"knowledge/**/*.yaml\"\n    - \"agents/**/*.yaml\"\n")
    (project / "knowledge" / "notes.txt").write_text("not a definition")
    key = new_key(local_env, f"cli-autoload-{secrets.token_hex(4)}", "ada")
    sys.path.insert(0, str(ROOT / "localstack"))
    try:
        import stack
    finally:
        sys.path.remove(str(ROOT / "localstack"))
    assert stack.autoload_files(project) == [project / "agents" / "research-agent.yaml",
                                             project / "knowledge" / "research.yaml"]
    stack.autoload(local_env["KB_API_URL"], key, project)
    printed = capsys.readouterr().out
    assert "knowledgebase/research-docs created" in printed and "agent/research-agent created" in printed
    stack.autoload(local_env["KB_API_URL"], key, project)  # the second time changes nothing
    assert capsys.readouterr().out.count(" unchanged") == 3
    (project / "compozy.yaml").write_text("autoload:\n  enabled: false\n")
    assert stack.autoload_files(project) == []


def test_kb_sessions_record_and_end_a_conversation(admin):
    """Issue 31's `kb sessions`: open, add, complete without extraction (no model here), show."""
    agent = admin.json("agents", "create", f"Sessioned {secrets.token_hex(2)}")["id"]
    opened = admin.json("sessions", "open", "--agent", agent)
    assert opened["status"] == "OPEN"
    admin.json("sessions", "add", opened["id"], "--agent", agent, "--content", "We deploy on Tuesdays.")
    added = admin.json("sessions", "add", opened["id"], "--agent", agent, "--role", "assistant", stdin="Noted.")
    assert added["messages"] == [{"role": "user", "content": "We deploy on Tuesdays."},
                                 {"role": "assistant", "content": "Noted."}]
    assert admin.error("sessions", "complete", opened["id"], "--agent", agent,
                       code="INVALID_INPUT")["message"].startswith("knowledgeBaseId")
    done = admin.json("sessions", "complete", opened["id"], "--agent", agent, "--no-extract")
    assert (done["status"], done["extraction"]) == ("COMPLETED", None)
    assert admin.json("sessions", "show", opened["id"], "--agent", agent)["messageCount"] == 2


def test_a_knowledge_bases_rerank_default_is_applied_exported_and_changed(admin, tmp_path):
    name = f"reranked-{secrets.token_hex(3)}"
    text = KB_YAML.replace("research-docs", name).replace("  access:", "  search: {rerank: true}\n  access:")
    (tmp_path / "kb.yaml").write_text(text)
    assert [c["action"] for c in admin.json("apply", "-f", str(tmp_path / "kb.yaml"))] == ["created"]
    kb = next(k for k in admin.json("kbs", "list")["items"] if k["name"] == name)
    assert kb["search"] == {"rerank": True}
    exported = [d for d in yaml.safe_load_all(admin.run("export").stdout) if d["metadata"]["id"] == name]
    assert exported[0]["spec"]["search"] == {"rerank": True}
    (tmp_path / "kb.yaml").write_text(text.replace("rerank: true", "rerank: false"))
    changed = admin.json("apply", "-f", str(tmp_path / "kb.yaml"))
    assert [(c["action"], c["detail"]) for c in changed] == [("configured", "search")]
    assert admin.json("kbs", "update", kb["id"], "--rerank")["search"] == {"rerank": True}
    (tmp_path / "bad.yaml").write_text(text.replace("rerank: true", "rerank: sometimes"))
    assert "spec.search.rerank" in admin.error("apply", "-f", str(tmp_path / "bad.yaml"), code="INVALID_MANIFEST",
                                               expect=2)["message"]
    admin.run("kbs", "delete", kb["id"], "--yes")


def test_hierarchical_chunking_is_applied_exported_and_checked(admin, tmp_path):
    name = f"manuals-{secrets.token_hex(3)}"
    text = KB_YAML.replace("research-docs", name).replace(
        "    strategy: semantic\n    max_chunk_size: 1000\n    overlap: 200\n",
        "    strategy: hierarchical\n    parent_tokens: 800\n    child_tokens: 150\n    overlap: 20\n")
    (tmp_path / "kb.yaml").write_text(text)
    assert [c["action"] for c in admin.json("apply", "-f", str(tmp_path / "kb.yaml"))] == ["created"]
    kb = next(k for k in admin.json("kbs", "list")["items"] if k["name"] == name)
    assert kb["chunking"] == {"strategy": "hierarchical", "parentTokens": 800, "childTokens": 150, "chunkOverlap": 20}
    exported = [d for d in yaml.safe_load_all(admin.run("export").stdout) if d["metadata"]["id"] == name]
    assert exported[0]["spec"]["chunking"] == {"strategy": "hierarchical", "parent_tokens": 800, "child_tokens": 150,
                                               "overlap": 20}
    assert [c["action"] for c in admin.json("apply", "-f", str(tmp_path / "kb.yaml"))] == ["unchanged"]
    (tmp_path / "kb.yaml").write_text(text.replace("child_tokens: 150", "child_tokens: 100"))
    done = admin.run("apply", "-f", str(tmp_path / "kb.yaml"), "--json", expect=1)
    assert "child_tokens is 150 here, 100 in the file" in yaml.safe_load(done.stdout)[0]["detail"]
    # what the model cannot read is the API's 400, naming the field
    (tmp_path / "big.yaml").write_text(text.replace(name, name + "-big").replace("child_tokens: 150", "child_tokens: 400"))
    refused = admin.run("apply", "-f", str(tmp_path / "big.yaml"), "--json", expect=None)
    assert refused.returncode != 0 and "chunking.childTokens" in refused.stdout + refused.stderr
    (tmp_path / "bad.yaml").write_text(text.replace("child_tokens: 150", "child_tokens: many"))
    assert "spec.chunking.child_tokens" in admin.error("apply", "-f", str(tmp_path / "bad.yaml"),
                                                       code="INVALID_MANIFEST", expect=2)["message"]
    admin.run("kbs", "delete", kb["id"], "--yes")


def test_a_name_two_knowledge_bases_share_fails_only_the_definitions_using_it(local_env, tmp_path):
    """Two knowledge bases of one name (the README's curl example pasted twice) do not stop
    `kb apply` of files that never name them."""
    key = new_key(local_env, f"cli-apply-twins-{secrets.token_hex(4)}", "ada")
    cli = Cli(env=clean_env(KB_API_URL=local_env["KB_API_URL"], KB_API_KEY=key), cwd=tmp_path)
    twins = [cli.json("kbs", "create", "Product docs")["id"] for _ in range(2)]
    solo = tmp_path / "solo.yaml"
    solo.write_text("apiVersion: knowledge/v1\nkind: KnowledgeBase\nmetadata: {id: Handbook}\nspec: {}\n---\n"
                    "apiVersion: knowledge/v1\nkind: Agent\nmetadata: {id: Helper}\n"
                    "spec: {knowledge: [{knowledge_base: Handbook}]}\n")
    assert {(c["kind"], c["action"]) for c in cli.json("apply", "-f", str(solo))} == {
        ("knowledgebase", "created"), ("agent", "created"), ("tool", "created")}
    named = tmp_path / "named.yaml"
    named.write_text("apiVersion: knowledge/v1\nkind: Agent\nmetadata: {id: Docs bot}\n"
                     "spec: {knowledge: [{knowledge_base: Product docs}]}\n")
    (failed,) = cli.json("apply", "-f", str(named), expect=1)
    assert failed["action"] == "failed" and "AMBIGUOUS_NAME" in failed["detail"]
    assert all(kb in failed["detail"] for kb in twins), failed
