#!/bin/sh
# latency-triage.sh: the offline agent of agents/latency-triage.yaml (provider `command`).
#
# Input (stdin): the invocation as one line of compact JSON, e.g.
#   {"invocation_id":"inv_…","attempt":1,"trigger":"…","agent":"…","event":{…,"data":{
#    "endpoint":"/api/v2/orders","p99_ms":4800,"sla_ms":1000,"duration_minutes":6}}}
# Output (stdout): one JSON object matching the agent's output.schema.
# Errors: a message on stderr and a non-zero exit status.
#
# Plain POSIX sh + sed + awk: no bash, no python, no jq. The event is untrusted data: it is
# never evaluated, never put on a command line, and every string taken from it is
# re-encoded before it is printed (quotes and backslashes escaped, control characters
# dropped).

set -eu

# Byte-wise text processing, whatever the user's locale.
LC_ALL=C
export LC_ALL

prog=latency-triage

die() {
    printf '%s: %s\n' "$prog" "$1" >&2
    exit 1
}

# The whole invocation on one line (compact JSON has no raw newlines; be lenient anyway).
input=$(tr '\n\r\t' '   ')
[ -n "$input" ] || die "no input on stdin (expected the invocation as one line of JSON)"
[ "${#input}" -le 1048576 ] || die "input larger than 1 MiB"

# A JSON number: -?digits(.digits)?([eE][+-]?digits)?
num_re='\(-\{0,1\}[0-9][0-9]*\(\.[0-9][0-9]*\)\{0,1\}\([eE][-+]\{0,1\}[0-9][0-9]*\)\{0,1\}\)'

# json_number KEY: the number value of "KEY" (the last occurrence), or nothing.
# "KEY" followed by `"` cannot occur inside a JSON string (every quote in a string is
# preceded by a backslash), so only a real key matches.
json_number() {
    printf '%s\n' "$input" |
        sed -n 's/.*"'"$1"'"[[:space:]]*:[[:space:]]*'"$num_re"'[[:space:]]*[,}].*/\1/p'
}

# json_string_raw KEY: the still-escaped body of the string value of "KEY", or nothing.
json_string_raw() {
    printf '%s\n' "$input" |
        sed -n 's/.*"'"$1"'"[[:space:]]*:[[:space:]]*"\([^"\\]*\(\\.[^"\\]*\)*\)".*/\1/p'
}

# json_reencode RAW: decodes a JSON string body and encodes it again for output:
# \" and \\ stay escaped, \/ becomes /, \n \r \t become a space, \b \f and \u0000-\u001f
# \u007f and lone surrogates are dropped, other \uXXXX escapes are kept (printable
# ASCII ones are decoded), raw control characters are dropped, and the result is cut
# after about 512 bytes (with "..." appended). The value reaches awk on stdin (it holds no newline), never
# through awk -v (which would interpret backslashes), the environment (which limits a
# variable to 128 KiB on Linux) or a command line.
json_reencode() {
    printf '%s\n' "$1" | awk '
        function hexval(h,    i, v) {
            v = 0
            for (i = 1; i <= 4; i++)
                v = v * 16 + index("0123456789abcdef", tolower(substr(h, i, 1))) - 1
            return v
        }
        NR == 1 {
            s = $0; n = length(s); out = ""; i = 1; max = 512
            while (i <= n) {
                c = substr(s, i, 1)
                # Cap the length, cutting only between characters (never before a UTF-8
                # continuation byte, \200-\277).
                if (length(out) >= max && !(c >= "\200" && c <= "\277")) {
                    out = out "..."
                    break
                }
                if (c == "\\") {
                    e = substr(s, i + 1, 1)
                    if (e == "\"")      { out = out "\\\""; i += 2; continue }
                    if (e == "\\")      { out = out "\\\\"; i += 2; continue }
                    if (e == "/")       { out = out "/"; i += 2; continue }
                    if (e ~ /^[nrt]$/)  { out = out " "; i += 2; continue }
                    if (e == "u") {
                        h = substr(s, i + 2, 4)
                        if (h ~ /^[0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f]$/) {
                            v = hexval(h)
                            if (v >= 55296 && v < 56320) {
                                # High surrogate: kept only with its low surrogate, as one unit.
                                l = substr(s, i + 6, 6)
                                if (l ~ /^\\u[dD][c-fC-F][0-9A-Fa-f][0-9A-Fa-f]$/) {
                                    out = out "\\u" h "\\u" substr(l, 3, 4)
                                    i += 12; continue
                                }
                            }
                            else if (v >= 56320 && v < 57344) { }   # lone low surrogate
                            else if (v == 34)             out = out "\\\""
                            else if (v == 92)             out = out "\\\\"
                            else if (v >= 32 && v < 127)  out = out sprintf("%c", v)
                            else if (v >= 128)            out = out "\\u" h
                            i += 6; continue
                        }
                    }
                    i += 2; continue       # \b, \f or an invalid escape: dropped
                }
                if (c ~ /[[:cntrl:]]/) { i++; continue }
                if (c == "\"") out = out "\\\""; else out = out c
                i++
            }
            printf "%s", out
        }'
}

p99=$(json_number p99_ms)
sla=$(json_number sla_ms)
duration=$(json_number duration_minutes)
endpoint_raw=$(json_string_raw endpoint)

[ -n "$p99" ] || die "input lacks a numeric event.data.p99_ms"
[ -n "$sla" ] || die "input lacks a numeric event.data.sla_ms"
[ -n "$duration" ] || die "input lacks a numeric event.data.duration_minutes"
case $input in
    *'"endpoint"'*) ;;
    *) die "input lacks event.data.endpoint" ;;
esac
endpoint=$(json_reencode "$endpoint_raw")
[ -n "$endpoint" ] || die "input lacks a non-empty string event.data.endpoint"

# Severity from how far over the SLA (ratio) and for how long (minutes):
#   ratio < 1 -> none (the numbers do not show a breach), < 2 -> minor, < 5 -> major,
#   >= 5 -> critical; a breach of 30 minutes or more is raised one level.
# Escalate when critical, or major for 15 minutes or more.
if ! result=$(P99="$p99" SLA="$sla" DUR="$duration" EP="$endpoint" awk '
    function step(s) { steps = steps (steps == "" ? "" : ",") "\"" s "\"" }
    BEGIN {
        CONVFMT = "%.10g"; OFMT = "%.10g"
        p99 = ENVIRON["P99"] + 0; sla = ENVIRON["SLA"] + 0; dur = ENVIRON["DUR"] + 0
        ep = ENVIRON["EP"]
        if (sla < 0.001) { print "sla_ms must be at least 0.001"; exit 1 }
        if (p99 < 0 || dur < 0) { print "p99_ms and duration_minutes must not be negative"; exit 1 }
        if (p99 > 1e9 || sla > 1e9 || dur > 1e7) { print "p99_ms, sla_ms or duration_minutes out of range"; exit 1 }

        ratio = p99 / sla
        r = int(ratio * 100 + 0.5) / 100
        if (ratio < 1) level = 0
        else if (ratio < 2) level = 1
        else if (ratio < 5) level = 2
        else level = 3
        if (level >= 1 && level < 3 && dur >= 30) level++
        split("none minor major critical", names, " ")
        severity = names[level + 1]
        escalate = (level == 3 || (level == 2 && dur >= 15)) ? "true" : "false"

        if (level == 0) {
            summary = "p99 of " ep " is " p99 " ms against a " sla " ms SLA (ratio " r "): the reported breach is not confirmed by the numbers."
            step("Check the SLA threshold configured in the APM for " ep ": the event and the monitor disagree.")
        } else {
            summary = "p99 of " ep " is " p99 " ms, " r "x its " sla " ms SLA, for " dur " minutes: " severity "."
            if (level == 3)
                step("Page the owner of " ep " now and consider shedding load or a degraded mode while investigating.")
            step("Compare the breach start with the latest deployment touching " ep ": roll back if it began within 30 minutes of a deploy.")
            step("Check saturation of the service behind " ep ": CPU, memory, DB connection pool, thread pool and queue depth.")
            if (level >= 2)
                step("Look at slow queries and lock waits in the database used by " ep ", and at the latency of its downstream calls.")
            if (dur >= 30)
                step("The breach has lasted " dur " minutes: treat it as sustained, not a transient spike, and open an incident.")
            else
                step("Watch the next 10 minutes of p99: if it keeps rising, escalate.")
        }

        # Built by concatenation, not sprintf (mawk limits sprintf to 8 KiB).
        print "{\"severity\":\"" severity "\",\"overage_ratio\":" r ",\"endpoint\":\"" ep "\"," \
            "\"p99_ms\":" p99 ",\"sla_ms\":" sla ",\"duration_minutes\":" dur "," \
            "\"escalate\":" escalate ",\"summary\":\"" summary "\",\"next_steps\":[" steps "]}"
    }'); then
    die "${result:-awk failed}"
fi

printf '%s\n' "$result"

# Escalation: a follow-up event, declared in the manifest's `emits`, for
# triggers/server-incident-escalation.yaml. pap gives it its id, source, time and
# triggered_by. Every value here was checked or re-encoded above.
case $result in
    *'"escalate":true'*)
        if [ -n "${PAP_EMIT_FILE:-}" ]; then
            severity=$(printf '%s\n' "$result" | sed -n 's/^{"severity":"\([a-z]*\)".*/\1/p')
            printf '{"type":"server.incident.escalation_required","data":{"endpoint":"%s","severity":"%s","p99_ms":%s,"sla_ms":%s,"duration_minutes":%s}}\n' \
                "$endpoint" "$severity" "$p99" "$sla" "$duration" >>"$PAP_EMIT_FILE"
        fi
        ;;
esac
