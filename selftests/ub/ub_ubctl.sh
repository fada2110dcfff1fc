#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# ubctl against ub.ko without hardware (the registry stub: device 0 with
# ports 0 and 1): every command, text and JSON, the extended ACK of a
# refusal, usage errors, port events on the monitor group, ping's summary.
# The malformed-request batch is ub_nlcheck.sh.

DIR=$(dirname "$0")
. "$DIR/../kselftest/ktap_helpers.sh"

MODULE=${UB_MODULE:-/lib/modules/ub.ko}
UBCTL=$(command -v ubctl)

ktap_print_header
if [ -z "$UBCTL" ] || [ ! -f "$MODULE" ]; then
	ktap_skip_all "no ubctl or no $MODULE"
	exit "$KSFT_SKIP"
fi
if [ -d /sys/module/ub ]; then
	ktap_skip_all "ub is already loaded"
	exit "$KSFT_SKIP"
fi

# ok: ubctl ARGS succeeds; its output is shown as diagnostics.
ok() {
	out=$("$UBCTL" "$@" 2>&1)
	rc=$?
	echo "$out" | sed 's/^/# /'
	return $rc
}
# shows PATTERN ARGS: ubctl ARGS succeeds and prints PATTERN.
shows() {
	pat=$1
	shift
	ok "$@" && echo "$out" | grep -q -- "$pat"
}
# refused STATUS PATTERN ARGS: ubctl ARGS exits STATUS and says PATTERN.
refused() {
	want=$1
	pat=$2
	shift 2
	out=$("$UBCTL" "$@" 2>&1)
	rc=$?
	echo "$out" | sed 's/^/# /'
	echo "# exit status $rc"
	[ "$rc" -eq "$want" ] && echo "$out" | grep -q -- "$pat"
}
t_dev_json() { shows '"ports":2' -j dev show 0; }
t_dev_name() {
	name=$("$UBCTL" -j dev show 0 | sed -n 's/.*"name":"\([^"]*\)".*/\1/p')
	[ -n "$name" ] && shows '"index":0' -j dev show "$name" && shows "^0/1:" port show "$name/1"
}
t_port_json() { shows '"dll-state":"normal"' -j port show 0/1; }
t_port_stats() { shows '"link-stats"' -j -s port show 0/1; }
t_addr() {
	ok addr add 0 cna16:0x0100 && ok addr add 0 10.0.0.1 &&
		shows '{"type":"ipv4","ipv4":"10.0.0.1"}' -j addr show 0 &&
		ok addr del 0 10.0.0.1 && ok addr del 0 cna16:0x0100
}
t_route() {
	ok route add 0 10.1.0.0/16 ports 0,1 per-packet &&
		shows 'dev 0 10.1.0.0/16 ports 0,1 per-packet' route show &&
		shows '"load-balance":"per-packet"' -j route show 0 &&
		ok route del 0 10.1.0.0/16
}
t_port_set() { ok port set 0/1 down && ok port set 0/1 up retry-threshold 8 && shows '"num-retry-threshold":8' -j port show 0/1; }
t_npi() { ok npi set 0 npi 5 && shows '"npi":5' -j dev show 0; }
t_no_dev() { refused 1 'No such device: .* \[attribute port.dev-index\]' port set 9/0 up; }
t_host_bits() { refused 1 'ubctl: route-add: .*\[attribute route.dst\]' route add 0 10.1.2.3/16 ports 0; }
t_usage() { refused 2 'out of range (0-63)' port show 0/64 && refused 2 'IPv4 or IPv6' ping cna16:0x0100; }
t_monitor() {
	"$UBCTL" -j monitor -c 2 > /tmp/ubctl-monitor.out 2>&1 &
	pid=$!
	sleep 1
	"$UBCTL" port set 0/0 down && "$UBCTL" port set 0/0 up
	sleep 1
	kill "$pid" 2>/dev/null
	wait "$pid"
	sed 's/^/# /' /tmp/ubctl-monitor.out
	grep -q '"event":"link-down"' /tmp/ubctl-monitor.out && grep -q '"event":"link-up"' /tmp/ubctl-monitor.out
}
t_ping() { shows '3 packets transmitted, 3 received, 0% packet loss' ping -c 3 -i 0.2 -I 0 10.0.0.2; }
t_stats() { shows '"echo-requests"' -j stats 0; }

ktap_set_plan 17
ktap_test_result "insmod ub.ko" insmod "$MODULE"
ktap_test_result "dev show -j" t_dev_json
ktap_test_result "a device by its name" t_dev_name
ktap_test_result "port show -j" t_port_json
ktap_test_result "port show -j -s has the counters" t_port_stats
ktap_test_result "addr add/show/del" t_addr
ktap_test_result "route add/show/del" t_route
ktap_test_result "port set down, up, retry threshold" t_port_set
ktap_test_result "npi set keeps the mode" t_npi
ktap_test_result "unknown device: extack message and attribute" t_no_dev
ktap_test_result "host bits past the prefix: kernel's extack" t_host_bits
ktap_test_result "usage errors exit 2" t_usage
ktap_test_result "monitor shows link-down and link-up" t_monitor
ktap_test_result "ping summary" t_ping
ktap_test_result "stats -j" t_stats
ktap_test_result "completion" ok completion bash
ktap_test_result "rmmod ub" rmmod ub
ktap_finished
