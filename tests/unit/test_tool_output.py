"""What a tool answers the model: the tool result matches the outputSchema the tool
declares (MCP clients validate it), and the text block cites each passage's document,
page and section. Through the SDK's own server and client, in memory."""
from dataclasses import replace

import anyio
import jsonschema
import pytest
from mcp import types
from mcp.server.lowlevel import Server
from mcp.shared.memory import create_connected_server_and_client_session

from chalicelib.agents import ToolRun, output, tools
from chalicelib.api.mcp_result import call_result, citation, readable
from chalicelib.api.mcp_server import as_sdk_result
from chalicelib.api.views import KB_MISSING, tool_result_view
from chalicelib.documents.entries import Entry
from chalicelib.retrieval import Passage, SearchResult
from chalicelib.retrieval.model import AlsoIn, Scores


def passage(rank: int, *, source="manual.pdf", path="guides/manual.pdf", page=None, headers=(), rerank=None):
    return Passage(rank=rank, content=f"passage {rank}", source=source, path=path, document_id=f"doc_{rank}",
                   knowledge_base_id="kb_1", chunk_index=rank - 1, page=page, headers=list(headers),
                   similarity=0.5, metadata={"team": "pumps"}, tokens=3, truncated=False,
                   scores=Scores(0.5, None, None), rerank_score=rerank)


PASSAGES = (passage(1, page=3, headers=["Install", "Debian"]),
            replace(passage(2, source="install.md", path="guides/install.md", headers=["Install"], rerank=0.9),
                    also_in=(AlsoIn("doc_9", "kb_1", "install.html", "html/install.html", 19),
                             AlsoIn("doc_8", "kb_1", "Installing", None, 18))),
            passage(3, source="Resetting the pump", path=None))
FOUND = ToolRun(query="install", result=SearchResult(
    query="install", knowledge_base_ids=("kb_1",), knowledge_base_names=("Pump manual",), passages=PASSAGES,
    summary="3 passages from 3 sources (Resetting the pump, install.md, manual.pdf), 9 tokens.", tokens_used=9,
    omitted=0, cached=False, strategy="hybrid", took_ms=4))
NOTHING = ToolRun(query="x", result=SearchResult(
    query="x", knowledge_base_ids=("kb_1",), knowledge_base_names=("Pump manual",), passages=(),
    summary="No passages matched the query.", tokens_used=0, omitted=0, cached=True, strategy="hybrid", took_ms=1))
GONE = ToolRun(query="x", result=None)
ENTRIES = ToolRun(query="reset", result=None, entries=(passage(1, source="Resetting the pump", path=None),))
ADDED = ToolRun(query="Pressure switch", result=None, knowledge_base_name="Pump notes",
                added=Entry(id="entry_0123456789abcdef", knowledge_base_id="kb_1", title="Pressure switch", chunks=1,
                            tokens=20, metadata={}, created=True))


def test_the_output_schemas_are_valid_json_schema():
    for schema in tools.OUTPUT_SCHEMAS.values():
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object"  # MCP: an outputSchema describes an object


@pytest.mark.parametrize("run, schema", [(FOUND, output.KNOWLEDGE_BASE_RESULT), (NOTHING, output.KNOWLEDGE_BASE_RESULT),
                                         (GONE, output.KNOWLEDGE_BASE_RESULT),
                                         (ENTRIES, output.KNOWLEDGE_SEARCH_RESULT),
                                         (ADDED, output.KNOWLEDGE_BASE_WRITE_RESULT)])
def test_every_tool_result_matches_its_output_schema(run, schema):
    jsonschema.validate(tool_result_view(run), schema)


def test_the_schema_holds_exactly_the_fields_the_result_has():
    """additionalProperties false: a field added to the view and not to the schema fails here."""
    view = tool_result_view(FOUND)
    view["results"][0]["extra"] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(view, output.KNOWLEDGE_BASE_RESULT)
    with pytest.raises(jsonschema.ValidationError):  # a passage without its citation fields
        jsonschema.validate({**tool_result_view(FOUND), "results": [
            {k: v for k, v in r.items() if k != "section"} for r in tool_result_view(FOUND)["results"]]},
            output.KNOWLEDGE_BASE_RESULT)


def test_the_results_carry_path_page_and_section():
    results = tool_result_view(FOUND)["results"]
    assert [(r["path"], r["page"], r["section"]) for r in results] == [
        ("guides/manual.pdf", 3, "Install > Debian"), ("guides/install.md", None, "Install"), (None, None, None)]
    assert "rerankScore" not in results[0] and results[1]["rerankScore"] == 0.9
    # another document holding the same text: named, path and source; none: no field
    assert "alsoIn" not in results[0] and results[1]["alsoIn"] == [
        {"source": "install.html", "path": "html/install.html"}, {"source": "Installing", "path": None}]


def test_the_text_block_cites_each_passage():
    assert readable(tool_result_view(FOUND)) == (
        "Pump manual: 3 passages from 3 sources (Resetting the pump, install.md, manual.pdf), 9 tokens.\n\n"
        "[1] guides/manual.pdf p. 3 — Install > Debian\npassage 1\n\n"
        "[2] guides/install.md — Install (also in html/install.html, Installing)\npassage 2\n\n"
        "[3] Resetting the pump\npassage 3")
    assert readable(tool_result_view(NOTHING)) == "Pump manual: No passages matched the query."
    assert readable(tool_result_view(GONE)) == KB_MISSING["message"]
    assert readable(tool_result_view(ENTRIES)) == (
        "[1] Resetting the pump (knowledge://entries/doc_1)\npassage 1")
    assert citation({"source": "notes.txt", "path": "a/notes.txt", "page": None, "section": None}) == "a/notes.txt"


def test_a_deleted_knowledge_base_is_an_error_result_with_its_structured_form():
    answer = call_result(tool_result_view(GONE))
    assert answer["isError"] is True and answer["structuredContent"] == KB_MISSING
    assert answer["content"] == [{"type": "text", "text": KB_MISSING["message"]}]


def _through_the_sdk(view: dict, tool: dict):
    """One tools/list and one tools/call between the SDK's own server and client."""
    server = Server("test")

    @server.list_tools()
    async def list_tools():
        return [types.Tool(**tools.as_mcp(tool))]

    @server.call_tool(validate_input=False)
    async def call_tool(name, arguments):
        return as_sdk_result(call_result(view))

    async def run():
        async with create_connected_server_and_client_session(server) as client:
            listed = (await client.list_tools()).tools
            return listed, await client.call_tool(tool["name"], {"query": "install"})

    return anyio.run(run)


KB_TOOL = tools.knowledge_base_tool(kb_id="kb_1", kb_name="Pump manual", name="search_pump_manual",
                                    description="d", top_k=5, min_score=0.3)
SEARCH_TOOL = tools.knowledge_search_tool(max_results=5, min_score=0.3)


@pytest.mark.parametrize("run, tool", [(FOUND, KB_TOOL), (NOTHING, KB_TOOL), (GONE, KB_TOOL),
                                       (ENTRIES, SEARCH_TOOL), (ADDED, tools.write_tool(KB_TOOL, set()))])
def test_the_sdk_sends_and_its_client_accepts_every_result(run, tool):
    view = tool_result_view(run)
    listed, result = _through_the_sdk(view, tool)
    assert listed[0].outputSchema == tools.OUTPUT_SCHEMAS[tool["type"]]
    assert result.structuredContent == view and result.isError is (run is GONE)
    assert [c.text for c in result.content] == [readable(view)]


def test_a_result_that_breaks_the_schema_is_stopped_by_the_sdk():
    """What the server's check is for: a view that drifted from the schema never reaches a client."""
    view = tool_result_view(FOUND)
    del view["results"][0]["path"]
    _, result = _through_the_sdk(view, KB_TOOL)
    assert result.isError is True and "Output validation error" in result.content[0].text
