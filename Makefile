# SPDX-License-Identifier: GPL-2.0
#
# Out-of-tree build of ub.ko.
#
#   make                    build against the project's cached test kernel
#   make KDIR=/path/to/kbuild
#                           build against any Rust-enabled kernel build
#   make MO=/path/to/out    put the objects there instead of in the tree
#   make clean
#
# The kernel build of the default KDIR is made (or reused) by
# scripts/build-kernel; run scripts/setup once on a fresh machine.

KDIR ?= $(shell scripts/build-kernel test)
LLVM ?= -19
MO ?=

# Debian's Rust 1.96 (the kernel's toolchain) and the pinned bindgen come
# before rustup's proxies; scripts/lib.sh explains why.
KERNEL_PATH := $(shell bash -c '. scripts/lib.sh >/dev/null && echo "$$KERNEL_PATH"')

kmake = PATH="$(KERNEL_PATH)" $(MAKE) -C "$(KDIR)" M="$(CURDIR)" \
	$(if $(MO),MO="$(MO)") LLVM=$(LLVM)

.PHONY: all modules clean rustfmt rustfmtcheck

all: modules

modules:
	@test -n "$(KDIR)" || { echo "no kernel build: run scripts/setup, or give KDIR=" >&2; exit 1; }
	$(kmake) modules

clean:
	$(kmake) clean

# rustfmt of the kernel-side Rust code, with the kernel's .rustfmt.toml.
rustfmt rustfmtcheck:
	$(kmake) $@
