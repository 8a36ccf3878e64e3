#!/usr/bin/env bash
# A first call when the budget is short: the thirteenth session's GPU checks without
# the step table (call.sh minus step42), then call2.sh (both profiles, the loss probe).
sed '/gpu-suite.sh step42/d' bench/probes/call.sh > /tmp/call1.sh
bash /tmp/call1.sh
bash bench/probes/call2.sh
