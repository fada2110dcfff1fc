// SPDX-License-Identifier: GPL-2.0
//! The engine's event queue.

use super::Event;

/// Slots of the event queue.
pub const EVENT_SLOTS: usize = 16;

/// A queue of the 16 most recent [`Event`]s, oldest first.
///
/// # Contract
///
/// The driver drains the queue — [`super::Link::poll_event`] until it
/// returns `None` — after every input: each `handle_*` call,
/// `poll_transmit`, and the PHY and management inputs (`link_up`,
/// `link_down`, `phy_retrained`, ...). One block raises at most three
/// events (for example `RetryRollover`, then `RetrainRequest`; or
/// `Negotiated` and a `State`), and an input of a well-behaved peer raises
/// far fewer than 16, so a driver that drains after every input never
/// misses one. When the queue is full the oldest event is dropped to make
/// room and [`super::Counters::events_dropped`] counts it: a peer that
/// sends a flood of erroneous blocks in one `handle_receive` cannot grow
/// the engine's memory, and the [`super::Counters`] still hold every total.
#[derive(Clone, Copy, Debug)]
pub struct EventRing {
    slots: [Option<Event>; EVENT_SLOTS],
    head: usize,
    len: usize,
}

impl EventRing {
    /// An empty queue.
    pub(super) const fn new() -> Self {
        Self {
            slots: [None; EVENT_SLOTS],
            head: 0,
            len: 0,
        }
    }

    /// Events waiting.
    pub const fn len(&self) -> usize {
        self.len
    }

    /// `true` when drained.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends `ev`; returns `true` if the oldest event had to be dropped.
    #[inline]
    pub(super) fn push(&mut self, ev: Event) -> bool {
        let dropped = self.len == EVENT_SLOTS;
        if dropped {
            self.head = (self.head + 1) % EVENT_SLOTS;
            self.len -= 1;
        }
        let at = (self.head + self.len) % EVENT_SLOTS;
        if let Some(slot) = self.slots.get_mut(at) {
            *slot = Some(ev);
        }
        self.len += 1;
        dropped
    }

    /// Takes the oldest event.
    #[inline]
    pub(super) fn pop(&mut self) -> Option<Event> {
        if self.len == 0 {
            return None;
        }
        let ev = self.slots.get_mut(self.head).and_then(Option::take);
        self.head = (self.head + 1) % EVENT_SLOTS;
        self.len -= 1;
        ev
    }
}
