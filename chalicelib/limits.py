"""Every limit and default a caller can meet, in one place: the request parsers, the
tool schema and the error messages all read them from here. Deployment settings
(file sizes, page counts) are environment variables in chalicelib.config."""
from dataclasses import dataclass


@dataclass(frozen=True)
class Range:
    low: float
    high: float
    default: float

    def describe(self) -> str:
        return f"between {self.low:g} and {self.high:g}"


# Search
QUERY_MAX_CHARS = 2000
TOP_K = Range(1, 20, 5)
MIN_SCORE = Range(0.0, 1.0, 0.0)
MAX_TOKENS = Range(50, 100_000, 4000)
KNOWLEDGE_BASES_PER_SEARCH = 20
FILTER_LIST_MAX = 100
FILTER_FILENAME_MAX_CHARS = 500
FILTER_KEY_MAX_CHARS = 100  # Bedrock's
FILTER_MAX_CONDITIONS = 50  # across andAll/orAll, so one search stays one cheap WHERE
FILTER_MAX_DEPTH = 5
DEFAULT_STRATEGY = "hybrid"
HYBRID_WEIGHT = Range(0.0, 1000.0, 0.5)  # each of hybridWeights; they are scaled to sum to 1
# (semantic, keyword), min-max scores combined: chosen where hybrid ranks at least as well as
# each single strategy on both the SciFact train queries (bench/fusion.py) and the dev
# questions of the real manuals (bench/manuals.py), never on one alone. nDCG@10 on SciFact
# train by semantic weight: 0.5 0.836, 0.6 0.841, 0.65 0.837, 0.7 0.837, 0.75 0.833 (semantic
# alone 0.821, keyword 0.778); reciprocal ranks 0.824 (0.5) and 0.827 (0.7), each list scaled by
# its mean and spread 0.831 (0.6). Manual dev questions answered in the top 3 (of 32): 0.5 19,
# 0.6 21, 0.65 to 0.8 22 (semantic 21, keyword 18); reciprocal ranks and mean-and-spread 22.
# 0.7 is the middle of the weights where both sets are above their best single strategy.
HYBRID_WEIGHTS = (0.7, 0.3)
DEFAULT_PRIORITY = "similarity"
RERANK_CANDIDATES = 50  # with rerank, this many of the best candidates go to the reranker
BATCH_QUERIES_MAX = 20  # POST /search/batch: searches per request, run one after the other
# A search's answer stays in Redis this long (seed 003's cache), unless a write to one of
# its knowledge bases comes first (chalicelib/freshness.py).
RESULTS_CACHE_TTL_SECONDS = 3600
# Cached answers are served only while a gate key of this lifetime is in Redis: a change that
# could not be marked there (Redis away) is marked before the gate opens again, so no answer
# outlives a write by more than this (chalicelib/freshness.py).
RESULTS_CACHE_GATE_SECONDS = 10
# fields: ["summary"] answers each passage's first sentences up to this many tokens
# (seed 003's lazy loading; GET .../chunks/{chunkId} gives the whole text).
PASSAGE_SUMMARY_TOKENS = 40
# debug: true shows each candidate's text beside its score, its first this many characters:
# two lists of up to 100 candidates stay a small answer.
DEBUG_CANDIDATE_TEXT_CHARS = 200

# Knowledge-base tools of agents
TOOL_TOP_K = Range(TOP_K.low, TOP_K.high, 5)
# minScore is the passage's cosine similarity to the question. On the SciFact train queries
# (MiniLM) 0.3 keeps 94% of the relevant passages and 4% of random ones; 0.7 kept 19% of
# the relevant ones (make bench: the minScore table).
TOOL_MIN_SCORE = Range(MIN_SCORE.low, MIN_SCORE.high, 0.3)
TOOL_NAME_MAX_CHARS = 64  # what OpenAI, Anthropic and MCP clients all accept
TOOL_DESCRIPTION_MAX_CHARS = 1000

# Request bodies: API Gateway takes 10 MB; an inline upload (5 MiB in base64) fits in 7 MiB.
BODY_MAX_BYTES = 7 * 1024 * 1024
JSON_MAX_DEPTH = 32  # nothing the API accepts nests deeper than a few levels

# Names and text fields
NAME_MAX_CHARS = 200
DESCRIPTION_MAX_CHARS = 2000
PAGE_SIZE = Range(1, 100, 20)
ID_MAX_CHARS = 64
# A knowledge base's source (chalicelib/sources): another bucket or a local folder
SOURCE_FIELD_MAX_CHARS = 1024
SOURCE_SECRET_PREFIX = "kb-sources/"  # the only secrets the functions may read (infra/template.yaml)
SOURCE_SYNC_SECONDS = 20  # a sync copies for this long, then says `more` (API Gateway ends a request at 29 s)
# A knowledge base's access lists (roles, groups, user names: migration 0018)
ACCESS_LIST_MAX_NAMES = 50
ACCESS_NAME_MAX_CHARS = 64

# Documents and entries
FILENAME_MAX_CHARS = 1000
# A document's path below kb/{kbId}/: S3 keys are at most 1,024 bytes, and the prefix
# takes 24 of them.
PATH_MAX_BYTES = 1000
PATH_SEGMENT_MAX_CHARS = 255  # what Linux, macOS and Windows file systems allow a name
# Pages of a knowledge base's documents: a 1,000-document page of views is about 1 MB,
# well inside Lambda's 6 MB response.
DOCUMENT_PAGE_SIZE = Range(1, 1000, 100)
# A page of a document's chunks: whole texts of up to CHUNK_TOKENS.high tokens each (~40 KB),
# so 50 stay far below Lambda's 6 MB answer.
CHUNK_PAGE_SIZE = Range(1, 50, 20)
CONTENT_TYPE_MAX_CHARS = 200
METADATA_NAME_MAX_CHARS = 100
INLINE_UPLOAD_MAX_BYTES = 5 * 1024 * 1024
PRESIGNED_EXPIRY_SECONDS = 900
# A document fetched from a URL by the API (documents/url_fetch.py): its bytes sit in the
# API function's memory (2,048 MB) on their way to S3, and the whole fetch ends inside
# URL_TOTAL_SECONDS, each connect and receive within what is left of it (at most 5 s past
# it: API Gateway gives up at 29 s); larger or slower files go through a presigned PUT.
URL_MAX_BYTES = 50 * 1024 * 1024
URL_REDIRECTS = 5
URL_TOTAL_SECONDS = 20
URL_CONNECT_SECONDS = 5
URL_READ_SECONDS = 5  # one receive
URL_USER_AGENT = "kb-service/1 (+document fetch)"
URL_MAX_CHARS = 2048
ENTRY_TITLE_MAX_CHARS = 500
ENTRY_CONTENT_MAX_CHARS = 200_000
ENTRY_SEARCH_RESULTS = Range(1, 20, 5)
# knowledge_search answers each entry's whole text (seed 001: "the synthesized answer,
# truncated if needed") up to this many tokens: the default 5 results fill about the
# 4,000 tokens a knowledge-base tool's passages get (MAX_TOKENS), 20 at most 16,000.
KNOWLEDGE_SEARCH_CONTENT_TOKENS = 800
# knowledge-search and the knowledge_search tool answer an entry only when its passage's
# cosine similarity to the query reaches this (the quick-add tools' threshold, above):
# a question about something no entry covers answers nothing rather than the nearest.
KNOWLEDGE_MIN_SCORE = Range(MIN_SCORE.low, MIN_SCORE.high, 0.3)

# Knowledge extracted from conversations (POST /agents/{agentId}/knowledge/extract)
EXTRACT_MESSAGES_MAX = 1000
EXTRACT_MESSAGE_MAX_CHARS = 100_000
EXTRACT_TOTAL_MAX_CHARS = 1_000_000  # a conversation, all its messages
# Longer conversations than this are extracted after the request answers (202 and a job
# to poll): one model call over them can outlast API Gateway's 29 seconds.
EXTRACT_SYNC_MAX_CHARS = 8_000
EXTRACT_MIN_CONFIDENCE = Range(0.0, 1.0, 0.7)  # items the model is less sure of are dropped
EXTRACT_MERGE_SIMILARITY = 0.8  # seed 003: entries this close to an item go to the model to compare
EXTRACT_MERGE_CANDIDATES = 5  # seed 003: the top 5 of them
EXTRACT_MAX_ITEMS = 50  # per conversation; more are dropped
ENTRY_TYPES = ("fact", "procedure", "preference", "decision", "insight", "event", "other")

# Context assembly (POST /agents/{agentId}/context): the message's length, and how the
# token budget is shared between the agent's knowledge-base tools and its knowledge
# entries unless the caller says (what one leaves unused goes to the other).
CONTEXT_MESSAGE_MAX_CHARS = 8000
CONTEXT_ALLOCATION = {"knowledgeBases": 0.7, "knowledge": 0.3}
CONTEXT_KNOWLEDGE_RESULTS = 10  # knowledge entries considered

# Chunking, fixed per knowledge base at creation
CHUNK_TOKENS = Range(50, 8000, 500)
# A file's chunk is embedded after a line naming its document and section trail
# (chalicelib/ingestion/context.py): at most this many tokens of the model's window.
CHUNK_CONTEXT_TOKENS = 40
CHUNK_STRATEGIES = ("fixed", "semantic", "hierarchical")
HIERARCHICAL = "hierarchical"
# A knowledge base created without chunking settings, by embedding provider: (strategy,
# chunkTokens or parentTokens, chunkOverlap, childTokens). hierarchical indexes children that fit
# the model's window and answers their parent (retrieval/parents.py). The local model's sizes
# were chosen on the dev questions of bench/manuals.py, bash-doc, hybrid (docs/chunking.md): answer
# in the top 3 for 3/10, page 9/10, top-3 tokens 1,044 at 500 / 214; 800 / 214 3/10, 8/10, 1,525;
# 500 / 128 3/10, 8/10, 1,086 and a navigation page in a top 5. Titan's
# are Bedrock Knowledge Bases' hierarchical defaults (1,500 / 300, 60 of overlap); OpenAI's are
# file search's (800 tokens with 400 of overlap, no parents), its window holding them whole;
# hierarchical asked of OpenAI without sizes takes Titan's.
DEFAULT_CHUNKING = {
    "local": (HIERARCHICAL, 500, 50, 214),
    "bedrock": (HIERARCHICAL, 1500, 60, 300),
    "openai": ("fixed", 800, 400, None),
}
# The semantic strategy embeds every sentence in the Chunk step (300 s): the local model
# embedded SciFact's sentences at 165 a second on 2 cores (1,000 in 6.1 s), so 10,000 take
# about a minute here and two on a 2 GB Lambda's one vCPU. A longer document (about 500
# pages) is cut by the fixed strategy.
SEMANTIC_MAX_SENTENCES = 10_000
HNSW_MAX_DIMENSION = 2000  # pgvector's HNSW limit for the vector type

# Work per document: a file beyond these ends FAILED (TOO_MANY_SECTIONS, TOO_MANY_CHUNKS) in
# the Chunk step, before any embedding. Sections: the Rust Book on one page (1.9 MB HTML, ~550
# printed pages) has 625, the Cargo book 1,751, a 5,000-page PDF (MAX_PAGES) ~5,000; a 689 KB
# Markdown file of 50,000 headings is refused. Chunks: 50 MB of Debian's installed documentation
# (change logs, copyright files, READMEs: bench/big_file.py) is 14.4M tokens and makes 106,661
# chunks at the local model's 214 tokens (its window less the context line, overlap 50; short
# lines and sections make many chunks smaller); a limit of 120,000 lets such a file through. The
# Embed Map is distributed (no payload or history bound on the batches), so what bounds a
# document is time: 1,875 batches at EmbedWidth 8 on Lambda, and the Store step writing them
# (900 s an attempt, a retry resumes; bench/embed_width.py and bench/store_rate.py measure both).
MAX_SECTIONS_PER_FILE = 20_000
MAX_CHUNKS_PER_DOCUMENT = 120_000
# The Store step writes a document's chunks in transactions of this many, and deletes an old
# version's in transactions of DELETE_BATCH_CHUNKS (storage/chunk_versions.py); each holds the
# knowledge base's BM25 statistics rows (which a writer of the same knowledge base waits for)
# until it commits, and must commit inside the pipeline's statement and lock timeouts on a busy
# database: into a knowledge base of a million chunks the smaller batch stored as fast as larger
# ones and held the lock a quarter as long as a batch of 1,000, well inside the 30 s a writer of
# the same knowledge base waits for it. STORE_CONCURRENCY documents are stored at once (the Store
# function's reserved concurrency, StoreConcurrency in infra/template.yaml): a second writer
# nearly doubled the chunks stored a second; the default stays at the two a small database keeps
# up with, raised with its capacity. Both chosen from `.venv/bin/python bench/store_rate.py
# --into kb_bench` on the retrieval benchmark's million chunks (docs/aws.md has its figures).
STORE_BATCH_CHUNKS = 250
STORE_CONCURRENCY = 2
DELETE_BATCH_CHUNKS = 2000

# Statement and lock timeouts of the database sessions (storage/db.py), by the path a
# function serves (DATABASE_TIMEOUTS in infra/template.yaml): (statement_timeout,
# lock_timeout, idle_in_transaction_session_timeout), in milliseconds. The API answers
# inside API Gateway's 29 s or not at all, so a statement gets 10 s and a lock 3 s (a 503
# with Retry-After beyond them); the pipeline's steps run up to 300 s and retry.
DATABASE_TIMEOUTS_MS = {
    "api": (10_000, 3_000, 15_000),
    "pipeline": (120_000, 30_000, 60_000),
}
# A session whose client went away (a Lambda killed mid-statement) is noticed by the server
# within this (client_connection_check_interval, PostgreSQL 14+) and by TCP keepalives.
DATABASE_CLIENT_CHECK_MS = 10_000
DATABASE_RETRY_AFTER_SECONDS = 2
# BM25 blocks in 0026's layout packed a transaction (migration 0028), after the migrations and
# by each store's fold_tail, which the API's 10 s statement timeout bounds too: 500 full blocks
# took 0.18 s at a million chunks (364,307 blocks: ~130 s in all). The migration function stops
# taking batches this long before its own timeout.
BM25_REPACK_BLOCKS = 500
# Decoded BM25 postings a worker keeps between searches, under their knowledge base's blocks
# version (storage/postings_cache.py, PostingsCache), at ~11 bytes a posting: 96 MB of the API
# function's 2 GB holds ~9M postings, the commonest terms of several million-chunk knowledge
# bases (60 questions at a million chunks read 102 terms of 20,000 postings or more, 4.6M
# postings in all).
BM25_POSTINGS_CACHE_BYTES = 96 << 20
# A term with at least this many postings (over the knowledge bases searched) is shared between
# workers through Redis once decoded (storage/postings_cache.py, SharedBlocks), with its directory: a
# rarer term costs less to read from SQL than the round trip. At a million chunks 875 of 26,168
# terms have 10,000 or more, 188 MB at ~5 bytes a posting if every one were asked.
BM25_SHARED_MIN_POSTINGS = 10_000
# How long a shared term stays in Redis unread (its key names the blocks version, so a
# compaction leaves the old one to expire, or to Redis's eviction before that).
BM25_SHARED_SECONDS = 6 * 3600
MIGRATE_MARGIN_SECONDS = 30

# API keys and their use
KEY_NAME_MAX_CHARS = 100
KEY_EXPIRY_DAYS = Range(1, 3650, 365)  # expiresInDays; a key made without it does not expire
AUDIT_PAGE_SIZE = Range(1, 200, 50)
# Requests per second per API key (a key may have its own, `make key RATE=`), with bursts
# of this many seconds' worth; and keys that are not valid, per source address a minute.
# The deployment may set the first and the last (KEY_RATE_PER_SECOND, BAD_KEYS_PER_MINUTE).
KEY_RATE_PER_SECOND = 20
KEY_BURST_SECONDS = 2
BAD_KEYS_PER_MINUTE = 20
# All the keys of one organisation together (a key granted a higher rate lifts it to its own):
# half of what the API served warm on this 2-core machine (102 requests/s with 4 clients,
# docs/benchmarks.md), so one organisation with many keys leaves room for the others.
ORG_RATE_PER_SECOND = 50
ORG_BURST_SECONDS = 2
# A key's rate and organisation stay in Redis this long after it authenticates, so its
# next requests meet their bucket before the database lookup; a changed rate applies
# within this time.
KEY_LIMITS_REMEMBERED_SECONDS = 300
# A worker remembers the caller a key names this long (auth/keys.py): a revocation or a role
# change reaches every worker at its next request through Redis, so this bounds only what
# Redis cannot say, a key's expiry and a change made while Redis was unreachable. Asking the
# database on every request was one statement of the four a cached search made (and two
# more setting the session's organisation each way), bench/api_overhead.py.
KEY_REMEMBERED_SECONDS = 5
# A request's body is parsed before its rate limit (to read its cached answer in the check's
# round trip, api/http.py) only up to this size: a search's is a few hundred bytes, and a
# refused request should not pay for parsing a large one.
READ_AHEAD_BODY_MAX_BYTES = 16 * 1024
# The limiter's Redis timeout: past it a request goes unlimited, so it is longer than the
# query cache's 0.25 s (a miss there costs only an embedding). Margin, not a measured fix:
# cold bursts of 32 at load 20-45 here logged no limiter timeout at 0.25 s.
RATE_LIMIT_REDIS_TIMEOUT_SECONDS = 1.0

# GET /health: each check connects within the first and answers within the second; one
# that answers after the third is "slow" (200, degraded), as is one that connected and
# did not answer in time; only one that cannot be reached is "down" (503). Under a flood
# on this machine the bucket's check took over 2 s while everything answered (issue 33):
# a busy box must not page anyone. The answer comes within about 5 s, inside API
# Gateway's 29 s and a load balancer's usual probe timeout.
HEALTH_CONNECT_SECONDS = 2
HEALTH_ANSWER_SECONDS = 4
HEALTH_SLOW_MS = 1000
# A remote embedding provider's answer is kept this long per worker: /health needs no key,
# and each check of OpenAI or Bedrock is a billed request out of the rate ingestion needs.
HEALTH_EMBEDDING_CHECK_SECONDS = 60

# The OpenAI vector-store and Bedrock Retrieve APIs (chalicelib/compat): their own names and
# defaults, within the search's limits above. OpenAI allows 50 results and Bedrock 100; a
# search here answers at most TOP_K.high, so more is a 400 naming this limit.
OPENAI_SEARCH_RESULTS = Range(1, TOP_K.high, 10)  # max_num_results; OpenAI's default is 10
OPENAI_LIST_PAGE = Range(1, 100, 20)  # limit of the list endpoints, as OpenAI's
OPENAI_ATTRIBUTES_MAX = 16  # OpenAI's: 16 attributes, keys of 64 characters, strings of 512
OPENAI_ATTRIBUTE_KEY_MAX_CHARS = 64
OPENAI_ATTRIBUTE_VALUE_MAX_CHARS = 512
OPENAI_QUERIES_MAX = 10  # a search's query may be a list of strings
BEDROCK_RESULTS = Range(1, TOP_K.high, 5)  # numberOfResults; Bedrock's default is 5
# Both APIs answer every passage they find: the token budget of the product's search
# (maxTokens) is at its highest so no passage is left out to fit a context window.
COMPAT_MAX_TOKENS = int(MAX_TOKENS.high)
