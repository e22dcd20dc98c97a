import pytest

from chalicelib import limits
from chalicelib.agents import output, tools
from chalicelib.agents.invoke import check_arguments
from chalicelib.api.http import status_of
from chalicelib.errors import Conflict, Invalid


ANSWERS = "Answers the passages that best match the query, each with its document's path and its page or section."


def test_quick_add_names_are_snake_case_valid_and_unique():
    assert tools.quick_add_name("Product Documentation", set()) == "search_product_documentation"
    assert tools.quick_add_name("Q3 — Sales & Marketing!!", set()) == "search_q3_sales_marketing"
    assert tools.quick_add_name("Ünïcode Ωmega", set()) == "search_n_code_mega"
    assert tools.quick_add_name("!!!", set()) == "search_knowledge_base"
    taken = {"search_docs", "search_docs_2"}
    assert tools.quick_add_name("Docs", taken) == "search_docs_3"
    long = tools.quick_add_name("x" * 200, set())
    assert len(long) == 64 and tools.NAME_RULE.match(long)
    assert len(tools.quick_add_name("x" * 200, {long})) <= 64


@pytest.mark.parametrize("name", ["", "has space", "dot.name", "x" * 65, "émoji"])
def test_invalid_tool_names_are_refused(name):
    with pytest.raises(Invalid) as err:
        tools.check_name(name, set())
    assert status_of(err.value) == 400 and err.value.message.startswith("toolName:")


def test_a_taken_name_is_a_conflict():
    with pytest.raises(Conflict) as err:
        tools.check_name("search_docs", {"search_docs"})
    assert (status_of(err.value), err.value.code) == (409, "TOOL_NAME_TAKEN")


def test_the_tool_has_exactly_the_documented_shape():
    tool = tools.knowledge_base_tool(kb_id="kb_1", kb_name="Product Documentation", name="search_product_docs",
                                     description="Search product documentation knowledge base", top_k=5,
                                     min_score=0.7)
    assert set(tool) == {"id", "name", "description", "type", "schema", "config"}
    assert tool["id"].startswith("tool_kb_") and tool["type"] == "knowledge_base"
    assert tool["schema"] == {"type": "object", "properties": {
        "query": {"type": "string", "description": "What to search the knowledge base for: a question or keywords,"
                                                   " at most 2000 characters."},
        "topK": {"type": "number", "default": 5, "minimum": 1, "maximum": 20,
                 "description": "How many passages to answer at most, a whole number between 1 and 20."},
        "minScore": {"type": "number", "default": 0.7, "minimum": 0.0, "maximum": 1.0,
                     "description": "Leave out passages whose similarity in meaning to the query (each result's"
                                    " vectorScore) is below this, between 0 and 1: higher answers fewer, closer"
                                    " passages."}},
        "required": ["query"]}
    # rerank null: as its knowledge base says
    assert tool["config"] == {"knowledgeBaseId": "kb_1", "knowledgeBaseName": "Product Documentation",
                              "defaultTopK": 5, "defaultMinScore": 0.7,
                              "strategy": "hybrid", "maxTokens": 4000, "rerank": None, "mode": "read-only"}
    edited = tools.with_defaults(tool, 3, 0.5)
    assert edited["schema"]["properties"]["topK"]["default"] == 3 and edited["config"]["defaultMinScore"] == 0.5
    assert tool["config"]["defaultTopK"] == 5  # the original is untouched


def test_definitions_for_each_llm_api():
    tool = tools.knowledge_base_tool(kb_id="kb_1", kb_name="D", name="search_d", description="Search D",
                                     top_k=5, min_score=0.7)
    assert tools.as_openai(tool) == {"type": "function", "function": {
        "name": "search_d", "description": "Search D", "parameters": tool["schema"]}}
    assert tools.as_anthropic(tool) == {"name": "search_d", "description": "Search D", "input_schema": tool["schema"]}
    assert tools.as_mcp(tool) == {"name": "search_d", "description": "Search D", "inputSchema": tool["schema"],
                                  "outputSchema": output.KNOWLEDGE_BASE_RESULT}
    function = {"name": "get_weather", "type": "function", "description": "Weather",
                "schema": {"type": "object", "properties": {"city": {"type": "string"}}}}
    assert tools.as_mcp(function) == {"name": "get_weather", "description": "Weather",
                                      "inputSchema": function["schema"]}  # no outputSchema: not run here


def _parameters(schema: dict) -> dict:
    return schema["properties"]


def test_every_parameter_of_the_services_tools_says_what_it_is_and_its_bounds():
    kb_tool = tools.knowledge_base_tool(kb_id="kb_1", kb_name="D", name="search_d", description="d",
                                        top_k=4, min_score=0.6)
    search_tool = tools.knowledge_search_tool(max_results=5, min_score=0.3)
    write_tool = tools.write_tool(kb_tool, {"search_d"})
    for tool in (kb_tool, search_tool, write_tool):
        for fmt, convert in tools.FORMATS.items():
            definition = convert(tool)
            if definition is None:  # the worker's format has knowledge-base tools only
                assert fmt == "worker" and tool is not kb_tool
                continue
            schema = {"openai": lambda d: d["function"]["parameters"], "anthropic": lambda d: d["input_schema"],
                      "mcp": lambda d: d["inputSchema"], "worker": lambda d: d["input_schema"]}[fmt](definition)
            for name, parameter in _parameters(schema).items():
                assert parameter["description"].strip(), (fmt, name)
                if "maximum" in parameter:  # the bounds, in words as well
                    assert f"between {parameter['minimum']:g} and {parameter['maximum']:g}" in parameter["description"]
    assert str(limits.QUERY_MAX_CHARS) in _parameters(kb_tool["schema"])["query"]["description"]
    assert str(limits.QUERY_MAX_CHARS) in _parameters(search_tool["schema"])["query"]["description"]


def test_the_worker_format_is_seed_002s_kb_tool():
    tool = tools.knowledge_base_tool(kb_id="kb_1", kb_name="D", name="search_docs", description="Search the docs",
                                     top_k=4, min_score=0.6)
    worker = tools.as_worker(tool)
    assert (worker["name"], worker["kind"], worker["description"], worker["config"]) == (
        "search_docs", "kb", "Search the docs", {})
    assert worker["input_schema"]["required"] == ["query"]
    assert worker["input_schema"]["properties"]["top_k"]["type"] == "integer"
    assert worker["input_schema"]["properties"]["top_k"]["default"] == 4
    assert set(worker["input_schema"]["properties"]) == {"query", "top_k"}


def test_a_tool_stored_before_its_parameters_had_descriptions_gets_them_in_its_definitions():
    """Its schema is the service's, rebuilt from its stored defaults."""
    tool = tools.knowledge_base_tool(kb_id="kb_1", kb_name="D", name="search_d", description="d",
                                     top_k=3, min_score=0.4)
    stored = {**tool, "schema": {"type": "object", "properties": {
        "query": {"type": "string", "description": "Search query"},
        "topK": {"type": "number", "default": 3, "minimum": 1, "maximum": 20},
        "minScore": {"type": "number", "default": 0.4, "minimum": 0.0, "maximum": 1.0}}, "required": ["query"]}}
    assert tools.as_mcp(stored)["inputSchema"] == tool["schema"]
    assert tools.as_openai(stored)["function"]["parameters"] == tool["schema"]
    assert tools.as_anthropic(stored)["input_schema"]["properties"]["minScore"]["default"] == 0.4
    broken = {**stored, "config": {**stored["config"], "defaultTopK": 500}}  # never checked when stored
    assert tools.as_mcp(broken)["inputSchema"] == stored["schema"]


@pytest.mark.parametrize("name, description, expected", [
    ("Demo knowledge base", None,
     "Search the Demo knowledge base. " + ANSWERS),
    ("Product Documentation", "",
     "Search the Product Documentation knowledge base. " + ANSWERS),
    ("Pump manual", "  Service procedures and\nerror codes for the X200 pump ",
     "Search the Pump manual knowledge base: Service procedures and error codes for the X200 pump. " + ANSWERS),
    ("The Handbook KB", "HR rules!", "Search the Handbook knowledge base: HR rules! " + ANSWERS),
    ("Knowledge Base", None, "Search the knowledge base. " + ANSWERS),
])
def test_quick_add_describes_the_knowledge_base_in_its_own_words(name, description, expected):
    assert tools.quick_add_description(name, description) == expected


def test_a_long_knowledge_base_description_is_cut_to_fit_a_tool_description():
    described = tools.quick_add_description("Pumps", "word " * 1000)
    assert len(described) <= limits.TOOL_DESCRIPTION_MAX_CHARS
    assert described.startswith("Search the Pumps knowledge base: word word") and described.endswith("word… " + ANSWERS)


def test_arguments_are_checked_and_defaults_filled():
    tool = tools.knowledge_base_tool(kb_id="kb_1", kb_name="D", name="search_d", description="d",
                                     top_k=4, min_score=0.6)
    request = check_arguments({"query": " pumps "}, tool, "kb_1")
    assert (request.query, request.top_k, request.min_score, request.knowledge_base_ids) == ("pumps", 4, 0.6, ("kb_1",))
    request = check_arguments({"query": "x", "topK": 2.0, "minScore": 0}, tool, "kb_1")
    assert (request.query, request.top_k, request.min_score) == ("x", 2, 0.0)
    for bad in ({}, {"query": ""}, {"query": "x", "topK": 0}, {"query": "x", "topK": 2.5},
                {"query": "x", "minScore": 1.5}, {"query": "x", "colour": "red"}, ["query"],
                {"query": "x" * (limits.QUERY_MAX_CHARS + 1)}, {"query": "x", "topK": limits.TOP_K.high + 1}):
        with pytest.raises(Invalid) as err:
            check_arguments(bad, tool, "kb_1")
        assert err.value.code == "INVALID_ARGUMENTS" and status_of(err.value) == 400


def test_the_tool_schema_states_the_limits_that_invocation_enforces():
    tool = tools.knowledge_base_tool(kb_id="kb_1", kb_name="D", name="search_d", description="d",
                                     top_k=4, min_score=0.6)
    top_k = tool["schema"]["properties"]["topK"]
    for value, accepted in ((top_k["minimum"], True), (top_k["maximum"], True),
                            (top_k["minimum"] - 1, False), (top_k["maximum"] + 1, False)):
        try:
            check_arguments({"query": "x", "topK": value}, tool, "kb_1")
            assert accepted, value
        except Invalid:
            assert not accepted, value


def test_a_read_write_tool_brings_a_write_tool_named_after_it():
    kb_tool = tools.knowledge_base_tool(kb_id="kb_1", kb_name="Pump notes", name="search_pump_notes",
                                        description="d", top_k=4, min_score=0.6, mode=tools.READ_WRITE)
    assert tools.settings_of(kb_tool).mode == "read-write"
    writer = tools.write_tool(kb_tool, {"search_pump_notes", "add_to_pump_notes"})
    assert writer["name"] == "add_to_pump_notes_2" and writer["id"] == kb_tool["id"] + tools.WRITE_SUFFIX
    assert writer["config"] == {"knowledgeBaseId": "kb_1", "knowledgeBaseName": "Pump notes", "toolId": kb_tool["id"]}
    assert tools.write_tool({**kb_tool, "name": "notes"}, set())["name"] == "add_to_notes"
    assert tools.as_mcp(writer)["outputSchema"] == tools.OUTPUT_SCHEMAS[tools.KNOWLEDGE_BASE_WRITE]
    with pytest.raises(Invalid, match="mode: must be one of read-only, read-write"):
        tools.check_settings(None, None, None, "write")
    stored_before_modes = {**kb_tool, "config": {k: v for k, v in kb_tool["config"].items() if k != "mode"}}
    assert tools.settings_of(stored_before_modes).mode == tools.READ_ONLY
