"""A tool's answer as MCP's CallToolResult (2025-06-18): the tool result
(views.tool_result_view) as structuredContent, which the tool's outputSchema describes
(agents/output.py), and one text block a model reads and cites from, one passage a
paragraph under a line naming where it comes from:

    [1] guides/install.md p. 3 — Install > Debian (also in guides/install.html)
    <the passage>

Both the MCP endpoint (api/mcp_server.py) and `POST .../invoke?format=mcp` (which `kb mcp`
relays over stdio) answer it, so the two transports cannot differ."""


def call_result(view: dict) -> dict:
    """The CallToolResult's JSON. A deleted knowledge base's soft result is an error result
    the model reads; it carries its structured form too."""
    return {"content": [{"type": "text", "text": readable(view)}], "structuredContent": view,
            "isError": view.get("success") is False}


def readable(view: dict) -> str:
    if view.get("success") is False:
        return view["message"]
    if "entry" in view:  # a read-write tool's entry
        entry = view["entry"]
        done = "Added" if entry["created"] else "Already held, as"
        return f"{done} '{entry['title']}' in {view['knowledgeBaseName']} ({entry['url']})."
    if "knowledgeBaseName" not in view:  # knowledge_search: entries
        if not view["results"]:
            return "No knowledge entry matched the query."
        return "\n\n".join(f"[{i}] {hit['title']} ({hit['url']})\n{hit['content']}"
                           for i, hit in enumerate(view["results"], start=1))
    passages = [f"[{p['rank']}] {citation(p)}\n{p['content']}" for p in view["results"]]
    return "\n\n".join([f"{view['knowledgeBaseName']}: {view['summary']}", *passages])


def citation(passage: dict) -> str:
    """Where a passage is: its document's path (an entry's title), page and section."""
    where = passage.get("path") or passage["source"]
    if passage.get("page") is not None:
        where += f" p. {passage['page']}"
    if passage.get("section"):
        where += f" — {passage['section']}"
    if passage.get("alsoIn"):
        where += f" (also in {', '.join(a.get('path') or a['source'] for a in passage['alsoIn'])})"
    return where
