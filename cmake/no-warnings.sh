#!/bin/sh
# Runs a generator (flex, which has no -Werror) and fails if it printed anything on
# standard error: its warnings ("rule cannot be matched") fail the build, as the
# compiler's do.
err=$("$@" 2>&1 >/dev/null) || { printf '%s\n' "$err" >&2; exit 1; }
[ -z "$err" ] || { printf '%s\n' "$err" >&2; echo "$1: warnings are errors" >&2; exit 1; }
