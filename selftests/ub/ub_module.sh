#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# ub.ko loads and unloads cleanly, its KUnit suites ran at load time and
# passed (results read back from debugfs), and it can be loaded again after
# an unload.

DIR=$(dirname "$0")
. "$DIR/../kselftest/ktap_helpers.sh"
. "$DIR/ub_lib.sh"

# Every KUnit suite ub.ko carries; each must have run and passed.
SUITES="ub_proto_crc ub_proto_link ub_netlink"
KUNIT_DEBUGFS=/sys/kernel/debug/kunit

ktap_print_header
ub_require_module

ktap_set_plan $((5 + $(echo $SUITES | wc -w)))

ktap_test_result "insmod ub.ko" insmod "$MODULE"
ktap_test_result "module ub is live" grep -qx live /sys/module/ub/initstate

# KUnit writes "ok"/"not ok" as the last line of each suite's results.
suite_passed() {
	results="$KUNIT_DEBUGFS/$1/results"
	[ -r "$results" ] || { echo "# $results is missing"; return 1; }
	last=$(grep -E '^(not )?ok ' "$results" | tail -n 1)
	echo "# $1: $last"
	case "$last" in
	"ok "*) return 0 ;;
	*) return 1 ;;
	esac
}
for suite in $SUITES; do
	ktap_test_result "kunit suite $suite ran and passed" suite_passed "$suite"
done

ktap_test_result "rmmod ub" rmmod ub
ktap_test_result "module ub is gone" test ! -e /sys/module/ub

reload() {
	insmod "$MODULE" && rmmod ub && test ! -e /sys/module/ub
}
ktap_test_result "reload after unload" reload

ktap_finished
