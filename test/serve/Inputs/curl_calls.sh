# curl against the server at $TFM_SERVE_URL (serve_check.py --run): one line
# per call, the status code first.
u=$TFM_SERVE_URL
c() { curl -sS --max-time 30 -w ' %{http_code}\n' "$@"; }
c "$u/health"
c "$u/v1/models"
c -H 'Content-Type: application/json' \
  -d '{"prompt": "Hello", "max_tokens": 4, "temperature": 0}' "$u/v1/completions"
c -H 'Content-Type: application/json' \
  -d '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "temperature": 0}' \
  "$u/v1/chat/completions"
# A stream: the SSE events as they come (-N), one per line.
curl -sS -N --max-time 30 -H 'Content-Type: application/json' \
  -d '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "temperature": 0, "stream": true}' \
  "$u/v1/chat/completions" | grep -v '^$' | sed 's/"id": *"[^"]*"/ID/; s/"created": *[0-9]*/CREATED/'
c -H 'Content-Type: application/json' -d '{"content": "Hello world"}' "$u/tokenize"
c -H 'Content-Type: application/json' -d '{"tokens": [9707, 1879]}' "$u/detokenize"
c -d '{"prompt": ' "$u/v1/completions"
c "$u/nothing"
c "$u/metrics" | grep -E '^(tfm_requests_total|tfm_requests_running|[0-9]+$| [0-9]+$)'
