"""What the JSON API accepts and its OpenAPI 3.1 description (``GET /api/openapi.json``).

The limits are the API's published contract; the web UI validates its own parameters against
the same ones.
"""

from __future__ import annotations

from politecrawl._version import __version__

__all__ = ["openapi_document"]

#: Longest accepted query, in characters (after control characters are removed).
MAX_QUERY_CHARS = 1_000
#: Pages and page sizes a client may ask for (the searcher ranks page * limit hits).
MAX_PAGE = 1_000
MAX_LIMIT = 100
DEFAULT_LIMIT = 10


# -- OpenAPI ----------------------------------------------------------------------


def openapi_document() -> dict:
    """OpenAPI 3.1 description of the JSON API."""
    error = {"$ref": "#/components/schemas/Error"}
    err_resp = lambda text: {"description": text, "content": {"application/json": {"schema": error}}}  # noqa: E731
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "politecrawl search API",
            "version": __version__,
            "description": "Search the pages a politecrawl crawl has indexed (BM25 ranking).",
        },
        "paths": {
            "/api/search": {
                "get": {
                    "operationId": "search",
                    "summary": "Ranked search results",
                    "description": (
                        'Free-text terms are OR-ed (an upper-case OR between them is no word); "quoted phrases" '
                        "must occur; -term excludes; site:host restricts to a host and its subdomains; "
                        "filetype:/type:KIND, lang:CODE, after:DATE and before:DATE (YYYY, YYYY-MM or YYYY-MM-DD) "
                        "filter by document kind, language (declared, else detected) and date. "
                        "Control characters are removed."
                    ),
                    "parameters": [
                        {
                            "name": "q",
                            "in": "query",
                            "required": True,
                            "description": "The query.",
                            "schema": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS},
                        },
                        {
                            "name": "page",
                            "in": "query",
                            "required": False,
                            "schema": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE, "default": 1},
                        },
                        {
                            "name": "limit",
                            "in": "query",
                            "required": False,
                            "description": "Hits per page.",
                            "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT},
                        },
                        {
                            "name": "group",
                            "in": "query",
                            "required": False,
                            "description": "1: at most 2 hits of one site on a page while other sites' hits can "
                            "fill it (the best 100 hits are grouped; past them, the ranking); 0: the ranking.",
                            "schema": {"type": "integer", "enum": [0, 1], "default": 1},
                        },
                    ],
                    "responses": {
                        "200": {
                            "description": "Results (possibly none).",
                            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/SearchResults"}}},
                        },
                        "400": err_resp(
                            "Missing or empty q, q too long, more than 8 phrases, page or limit not a whole "
                            "number in range."
                        ),
                        "503": err_resp(
                            "No search index yet; or the query ran past the server's time limit, or too many "
                            "searches are waiting (both with Retry-After)."
                        ),
                    },
                }
            },
            "/api/facets": {
                "get": {
                    "operationId": "facets",
                    "summary": "How many documents match, per site, type and language",
                    "description": "Each count is the total /api/search gives for the query with that site:, "
                    "type: or lang: added; suggestion: the query with misspelled words corrected, or null.",
                    "parameters": [
                        {
                            "name": "q",
                            "in": "query",
                            "required": True,
                            "schema": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS},
                        }
                    ],
                    "responses": {
                        "200": {
                            "description": "Counts.",
                            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Facets"}}},
                        },
                        "400": err_resp("Missing or empty q, or q too long."),
                        "503": err_resp("No search index yet, or the query ran past the time limit."),
                    },
                }
            },
            "/api/suggest": {
                "get": {
                    "operationId": "suggest",
                    "summary": "Completions of the query's last word (OpenSearch suggestions)",
                    "parameters": [
                        {
                            "name": "q",
                            "in": "query",
                            "required": False,
                            "schema": {"type": "string", "maxLength": MAX_QUERY_CHARS},
                        }
                    ],
                    "responses": {
                        "200": {
                            "description": "[query, [completed queries]]: words of the index, most frequent first.",
                            "content": {"application/json": {"schema": {"type": "array"}}},
                        },
                        "400": err_resp("q too long."),
                    },
                }
            },
            "/api/status": {
                "get": {
                    "operationId": "status",
                    "summary": "Crawl figures from the store, plus index statistics",
                    "responses": {
                        "200": {
                            "description": "Crawl status.",
                            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Status"}}},
                        },
                        "503": err_resp("No crawl store yet."),
                    },
                }
            },
            "/api/openapi.json": {
                "get": {
                    "operationId": "openapi",
                    "summary": "This document",
                    "responses": {
                        "200": {
                            "description": "OpenAPI 3.1 document.",
                            "content": {"application/json": {"schema": {"type": "object"}}},
                        }
                    },
                }
            },
        },
        "components": {
            "schemas": {
                "Hit": {
                    "type": "object",
                    "required": ["url", "title", "score", "snippet", "highlights"],
                    "properties": {
                        "url": {"type": "string"},
                        "title": {"type": "string"},
                        "score": {"type": "number"},
                        "snippet": {"type": "string", "description": "Plain text (not HTML)."},
                        "more_from_site": {
                            "type": "boolean",
                            "description": "Grouped: this hit's site has more hits on later pages (of the best 30).",
                        },
                        "highlights": {
                            "type": "array",
                            "description": "[start, end) character offsets of matched terms in snippet.",
                            "items": {
                                "type": "array",
                                "items": {"type": "integer", "minimum": 0},
                                "minItems": 2,
                                "maxItems": 2,
                            },
                        },
                    },
                },
                "SearchResults": {
                    "type": "object",
                    "required": ["query", "page", "limit", "total", "took_ms", "hits"],
                    "properties": {
                        "query": {"type": "string", "description": "The query as run (control characters removed)."},
                        "page": {"type": "integer"},
                        "limit": {"type": "integer"},
                        "group": {"type": "boolean", "description": "Whether the hits are grouped by site."},
                        "total": {"type": "integer", "description": "All matching documents."},
                        "took_ms": {"type": "number"},
                        "hits": {"type": "array", "items": {"$ref": "#/components/schemas/Hit"}},
                    },
                },
                "Facets": {
                    "type": "object",
                    "required": ["query", "total", "site", "type", "lang", "suggestion"],
                    "properties": {
                        "query": {"type": "string"},
                        "total": {"type": "integer"},
                        "site": {"type": "object", "additionalProperties": {"type": "integer"}},
                        "type": {"type": "object", "additionalProperties": {"type": "integer"}},
                        "lang": {"type": "object", "additionalProperties": {"type": "integer"}},
                        "suggestion": {"type": ["string", "null"]},
                    },
                },
                "Status": {
                    "type": "object",
                    "description": "The store's crawl figures (pages_fetched, queued, hosts, requests, "
                    "status_codes, …) and index statistics (null when there is no index).",
                    "properties": {
                        "pages_fetched": {"type": "integer"},
                        "queued": {"type": "integer"},
                        "hosts": {"type": "integer"},
                        "requests": {"type": "integer"},
                        "indexed": {
                            "type": ["integer", "null"],
                            "description": "Pages indexed: the documents the search index holds, what a search "
                            "can find (null when there is no index); the figure politecrawl status and check print.",
                        },
                        "index_taken": {
                            "type": "integer",
                            "description": "Stored pages the index updates have taken, indexable or not.",
                        },
                        "status_codes": {"type": "object", "additionalProperties": {"type": "integer"}},
                        "loop_lag": {
                            "type": "object",
                            "description": "How late the workers' event loops ran in the latest run: ticks, "
                            "p50_ms, p99_ms, max_ms (empty before any worker reported).",
                            "additionalProperties": {"type": "number"},
                        },
                        "unreached": {
                            "type": "object",
                            "description": "Hosts with work left that never answered and could not be reached, "
                            "and why: tls-untrusted, name-unresolved, refused or unreachable.",
                            "additionalProperties": {"type": "string"},
                        },
                        "index": {"type": ["object", "null"]},
                        "as_of": {
                            "type": "number",
                            "description": "When the store's figures were read (Unix time): they are reused "
                            "for a few seconds, however many clients ask.",
                        },
                    },
                    "additionalProperties": True,
                },
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {
                        "error": {
                            "type": "object",
                            "required": ["status", "message"],
                            "properties": {"status": {"type": "integer"}, "message": {"type": "string"}},
                        }
                    },
                },
            }
        },
    }
