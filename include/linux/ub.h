/* SPDX-License-Identifier: GPL-2.0 */
/*
 * UnifiedBus (UB): TP Channels for other kernel modules
 * (Documentation/ub/kapi.rst; a user: samples/ub/ub_echo.c).
 *
 * A module opens one RTP channel of a UB device with a struct ub_tp_bind
 * (<uapi/linux/ub.h>, the same request /dev/ub_tp takes, checked the same
 * way; timeout_ms is ignored: nothing here blocks) and gets a handle. It
 * sends whole messages with ub_tp_send() and receives each whole message
 * through ops->recv. A connect has its channel at once (sends before the
 * peer answered are queued); a listen (UB_TP_BIND_LISTEN) gets the channel
 * the peer opens for its key, or opened already.
 *
 * The callbacks run in process context from a work item of the handle, one
 * at a time and in order, with no lock of ub.ko held: they may sleep and
 * may call ub_tp_send(), but not ub_tp_close() on their own handle (it waits
 * for the running callback; defer it to a work item of the module).
 */
#ifndef _LINUX_UB_H
#define _LINUX_UB_H

#include <linux/types.h>
#include <uapi/linux/ub.h>

struct ub_tp;

struct ub_tp_ops {
	/* A whole message; msg is valid during the call only. Required. */
	void (*recv)(struct ub_tp *tp, void *priv, const void *msg, size_t len);
	/*
	 * The channel ended, after every message received before was handed
	 * to recv: err is 0 when the peer closed it, else the errno of its
	 * failure (-ETIMEDOUT, -ECONNRESET, -ECONNREFUSED, -EPROTO, -ENOBUFS,
	 * -ENODEV: the errnos read() gives on /dev/ub_tp). Called once;
	 * nothing is delivered after it. Optional.
	 */
	void (*error)(struct ub_tp *tp, void *priv, int err);
	/* A send that returned -EAGAIN may be retried now. Optional. */
	void (*writable)(struct ub_tp *tp, void *priv);
};

/*
 * Opens the channel req asks for and stores its handle in *tpp. 0, or
 * -EINVAL (a bad request, or no ops->recv), -EDESTADDRREQ, -EPROTONOSUPPORT
 * (req->version), -ENODEV (no such device), -ENOMEM, -EADDRINUSE, -EBUSY (a
 * channel of the same peer and key is still closing: try again), ...
 */
int ub_tp_open(const struct ub_tp_bind *req, const struct ub_tp_ops *ops,
	       void *priv, struct ub_tp **tpp);

/*
 * Sends one message of len bytes (copied before it returns). 0, or -EAGAIN
 * (the send queue is full, or a listen has no channel yet: ops->writable
 * follows once it has room), -EMSGSIZE, -EINVAL (len 0), -ENOTCONN (no peer
 * yet), -EPIPE (the peer closed), or the channel's error.
 */
int ub_tp_send(struct ub_tp *tp, const void *msg, size_t len);

/*
 * Tears the channel down (messages not yet acknowledged are abandoned) and
 * frees the handle; no callback runs once it returns. May sleep; not from
 * the handle's own callbacks.
 */
void ub_tp_close(struct ub_tp *tp);

#endif /* _LINUX_UB_H */
