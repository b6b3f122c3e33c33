# Sourced by the benchmark scripts that run nginx with HTTP/2: sets `h2on` and `h2listen` for the
# nginx on PATH. nginx before 1.25.1 turns HTTP/2 on per listen socket (`listen … http2`); later
# ones with the `http2 on;` directive.
nginx_version="$(nginx -v 2>&1 | sed -n 's|.*nginx/\([0-9.]*\).*|\1|p')"
if [ "$(printf '%s\n1.25.1\n' "$nginx_version" | sort -V | head -1)" = "1.25.1" ]; then
  h2on="http2 on;"; h2listen=""
else
  h2on=""; h2listen=" http2"
fi
