#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# A soak of the BER case of ub_ubctl.sh: ROUNDS (ubtest.soak=N on the
# kernel command line, default 8) rounds of 1000 echoes to this guest's
# own address (solo) or the peer, with BER 1e-5 on both links of this
# guest. The link layer repairs every bit error, so not one echo may be
# lost; a round that loses any shows where: ubctl's lost-echo lines, the
# device counters and every link counter. Not part of the suite
# (TEST_PROGS_EXTENDED): scripts/try-guests runs it for a flaky loss.

DIR=$(dirname "$0")
. "$DIR/../kselftest/ktap_helpers.sh"
. "$DIR/ub_lib.sh"

ktap_print_header
ub_require ubctl

rounds=$(sed -n 's/.*ubtest.soak=\([0-9]*\).*/\1/p' /proc/cmdline)
rounds=${rounds:-8}
target=$them
grep -qw ubtest.solo=1 /proc/cmdline && target=$me

round() {
	"$UBCTL" ping -c 1000 -i 0.01 -I 0 "$target" > /tmp/soak.out 2>&1
	tail -3 /tmp/soak.out | sed 's/^/# /'
	if ! grep -q '1000 packets transmitted, 1000 received' /tmp/soak.out; then
		grep -v 'bytes from' /tmp/soak.out | head -40 | sed 's/^/# lost: /'
		"$UBCTL" -j stats 0 | sed 's/^/# stats: /'
		"$UBCTL" -j -s port show 0 | sed 's/^/# ports: /'
		return 1
	fi
}

ktap_set_plan $((rounds + 1))
ktap_test_result "insmod ub.ko" insmod "$MODULE"
ub_configure || true
fabric link "vm$guest.0" --ber 1e-5
fabric link "vm$guest.1" --ber 1e-5
sleep 1
i=0
while [ $i -lt "$rounds" ]; do
	i=$((i + 1))
	ktap_test_result "round $i: 1000 echoes at BER 1e-5 lose nothing" round
done
fabric link "vm$guest.0" --ber 0
fabric link "vm$guest.1" --ber 0
ktap_finished
