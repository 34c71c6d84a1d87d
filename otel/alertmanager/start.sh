#!/bin/sh
# Alertmanager's configuration cannot read the environment: write the webhook
# URLs into it, then start. awk's printf copies a URL as it is (an & or a |
# in its query string included), where sed would read them as syntax.
# Usage: start.sh [TEMPLATE [OUTPUT]] (the compose service passes none).
set -eu
template="${1:-/etc/alertmanager/alertmanager.yml}"
out="${2:-/tmp/alertmanager.yml}"
: "${ALERT_WEBHOOK_URL:=http://127.0.0.1:9/no-webhook-set}"
: "${ALERT_TICKET_WEBHOOK_URL:=$ALERT_WEBHOOK_URL}"
export ALERT_WEBHOOK_URL ALERT_TICKET_WEBHOOK_URL
awk '
  /\$\{ALERT_WEBHOOK_URL\}/ { sub(/url:.*/, ""); printf "%surl: \"%s\"\n", $0, ENVIRON["ALERT_WEBHOOK_URL"]; next }
  /\$\{ALERT_TICKET_WEBHOOK_URL\}/ { sub(/url:.*/, ""); printf "%surl: \"%s\"\n", $0, ENVIRON["ALERT_TICKET_WEBHOOK_URL"]; next }
  { print }
' "$template" > "$out"
[ "$#" -ge 2 ] && exit 0  # asked only to write it (the tests)
exec /bin/alertmanager --config.file="$out" --storage.path=/alertmanager
