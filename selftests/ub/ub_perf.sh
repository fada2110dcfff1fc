#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# ubperf between the two guests of the default fabric topology, no faults:
# throughput (bw) and ping-pong latency (lat) over one RTP channel
# (selective retransmission with fast retransmit) for 64 B, 4 KiB and
# 64 KiB messages. vm0 serves, vm1 measures and prints the figures. A
# benchmark, not a test: scripts/perf-tp runs it (TEST_PROGS_EXTENDED);
# each case passes if ubperf completed.

DIR=$(dirname "$0")
. "$DIR/../kselftest/ktap_helpers.sh"

. "$DIR/ub_lib.sh"

UBPERF=$(command -v ubperf)
DURATION=$(sed -n "s/.*ubtest.perf_seconds=\([0-9]*\).*/\1/p" /proc/cmdline)
DURATION=${DURATION:-5}

ktap_print_header
ub_require ubctl ubperf
ub_require_peer

t_config() { insmod "$MODULE" && ub_configure && ub_peer_answers; }
# perf MODE SIZE KEY
perf() {
	if [ "$guest" = 0 ]; then
		"$UBPERF" server --dev 0 --from "$them" --key "$3" --mode "$1" \
			--retransmit sr --fast-retransmit --timeout-ms 60000 > /tmp/ubperf.out 2>&1
	else
		sleep 1
		"$UBPERF" client --dev 0 --to "$them" --key "$3" --mode "$1" --size "$2" \
			--duration "$DURATION" --retransmit sr --fast-retransmit --timeout-ms 60000 \
			> /tmp/ubperf.out 2>&1
	fi
	rc=$?
	sed 's/^/# /' /tmp/ubperf.out
	return $rc
}
t_bw_64() { perf bw 64 201; }
t_bw_4k() { perf bw 4096 202; }
t_bw_64k() { perf bw 65536 203; }
t_lat_64() { perf lat 64 204; }
t_lat_4k() { perf lat 4096 205; }
t_lat_64k() { perf lat 65536 206; }

ktap_set_plan 8
ktap_test_result "insmod, links, addresses, the peer answers" t_config
ktap_test_result "bw 64 B" t_bw_64
ktap_test_result "bw 4 KiB" t_bw_4k
ktap_test_result "bw 64 KiB" t_bw_64k
ktap_test_result "lat 64 B" t_lat_64
ktap_test_result "lat 4 KiB" t_lat_4k
ktap_test_result "lat 64 KiB" t_lat_64k
ktap_test_result "rmmod ub" rmmod ub
ktap_finished
