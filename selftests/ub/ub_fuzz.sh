#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Fuzzes ub.ko's two user interfaces for a bounded time:
# - the "ub" generic netlink family with generated requests, well-formed,
#   malformed and damaged (ub-nlfuzz, ubctl::nlfuzz): every request must be
#   answered, every answer decode, and the family still answer afterwards;
# - /dev/ub_tp from four threads on shared files (ub-tp fuzz): binds,
#   infos, unknown ioctls, reads and writes of 0 B to 1 MiB + 1, polls,
#   NULL and unmapped pointers, files closed under the other threads; no
#   call may get stuck.
# Then the device must still work (where a UB controller exists: its
# configuration restored, an echo to this guest's own address through the
# fabric) and the module must unload (no file, channel or request kept a
# reference). On the debug kernel the harness fails the run on any kernel
# report the fuzzers provoke (KASAN, UBSAN, lockdep, kmemleak, WARN).
#
# Time per fuzzer: ubtest.fuzz_seconds=N on the kernel command line; by
# default 20 s with a controller and 5 s without one (the family and the
# node exist with no device behind them, which still exercises every
# parser). Each run prints its seed: `ub-nlfuzz --seed S` and
# `ub-tp fuzz --seed S` replay the requests.
#
# A guest with a controller runs it only alone (ubtest.solo=1): the
# fuzzers open channels and send datagrams to the fabric's addresses,
# which would reach a peer guest's selftests. Skips (exit 4) without the
# module, ub-nlfuzz or ub-tp.

DIR=$(dirname "$0")
. "$DIR/../kselftest/ktap_helpers.sh"
. "$DIR/ub_lib.sh"

ktap_print_header
for t in ub-nlfuzz ub-tp ubctl; do
	if ! command -v $t > /dev/null; then
		ktap_skip_all "no $t"
		exit "$KSFT_SKIP"
	fi
done
ub_require_module
controller=0
if grep -qs 0x19e5 /sys/bus/pci/devices/*/vendor && grep -qs 0xd0b1 /sys/bus/pci/devices/*/device; then
	controller=1
	if ! grep -qw ubtest.solo=1 /proc/cmdline; then
		ktap_skip_all "a controller and a peer guest: runs only alone (ubtest.solo=1)"
		exit "$KSFT_SKIP"
	fi
fi
seconds=$(sed -n 's/.*ubtest.fuzz_seconds=\([0-9]*\).*/\1/p' /proc/cmdline)
[ -n "$seconds" ] || { [ $controller = 1 ] && seconds=20 || seconds=5; }

# Runs a fuzzer, its summary shown as diagnostics.
show() {
	"$@" > /tmp/ub-fuzz.out 2>&1
	rc=$?
	sed 's/^#*/#/' /tmp/ub-fuzz.out
	return $rc
}
t_nlfuzz() { show ub-nlfuzz --seconds "$seconds"; }
# This guest's 16-bit CNA (as ub_ctp.sh numbers them): CTP binds need one.
me_cna=cna16:0x0$((guest + 1))00
t_config() { ub_configure && "$UBCTL" addr add 0 "$me_cna"; }
# Binds go to this guest's own IPv4 address and CNA (CTP ends bind at
# once; a channel to itself may open) and to an address the fabric does
# not route (connects that time out).
t_cdevfuzz() {
	show ub-tp fuzz --seconds "$seconds" --addr "$me" --addr "$me_cna" --addr 10.0.9.9
}
# What the fuzzers may have changed, put back; then an echo to this
# guest's own address crosses the fabric.
t_still_works() {
	"$UBCTL" port set 0/0 up > /dev/null 2>&1
	"$UBCTL" port set 0/1 up > /dev/null 2>&1
	"$UBCTL" npi set 0 npi 1 > /dev/null 2>&1
	"$UBCTL" addr add 0 "$me" > /dev/null 2>&1
	"$UBCTL" route add 0 10.0.0.0/16 ports 0,1 per-packet > /dev/null 2>&1
	ub_links_up && "$UBCTL" ping -c 5 -i 0.1 -W 2 -I 0 "$me" > /tmp/ub-fuzz-ping.out 2>&1
	rc=$?
	sed 's/^/# /' /tmp/ub-fuzz-ping.out | tail -3
	return $rc
}

if [ $controller = 1 ]; then
	ktap_set_plan 6
else
	ktap_set_plan 4
fi
ktap_test_result "insmod ub.ko" insmod "$MODULE"
[ $controller = 1 ] && ktap_test_result "configure (address, CNA, route)" t_config
ktap_test_result "ub-nlfuzz: ${seconds} s of generated requests, each answered" t_nlfuzz
ktap_test_result "ub-tp fuzz: ${seconds} s of calls from 4 threads, none stuck" t_cdevfuzz
[ $controller = 1 ] && ktap_test_result "the device still echoes" t_still_works
ktap_test_result "rmmod ub (nothing kept a reference)" rmmod ub
ktap_finished
