/* rendezvous.h: balexec's TCP rendezvous (executor/README.md "Start-up, in order"; issue 4).
 *
 * Before any backend starts, every rank connects to rank 0 over TCP, says who it is and what
 * it runs (a check string: the plan's sha256 and step range), and gets back a small blob
 * that rank 0 made (the CUDA backend's ncclUniqueId). Rank 0 refuses a world whose ranks
 * disagree, names ranks that never came, and tells every connected rank why it failed, so no
 * rank waits for its own timeout when rank 0 already knows the answer. Plain POSIX (sockets,
 * poll): no MPI, no CUDA, no threads, no signals (MSG_NOSIGNAL), no printing. */
#ifndef BP_RENDEZVOUS_H
#define BP_RENDEZVOUS_H

#include <stddef.h>

#include "bp.h"

/* Same value and spelling as engine.h's, so that both headers may be included. */
#define BP_EXEC_TIMEOUT (-4)

#define BP_RDV_MAX_BLOB 4096
#define BP_RDV_MAX_CHECK 127
#define BP_RDV_MAX_SELF 63

struct bp_rdv_opts {
	const char *host;  /* rank 0's address (name or IPv4), where it listens */
	int port;          /* 1..65535 */
	int rank, world;
	double timeout_s;  /* the whole rendezvous, connect retries included (> 0) */
	const char *check; /* every rank must agree on it; up to 127 chars (NULL: "") */
	const char *self;  /* this rank's host name, for messages; cut to 63 chars (NULL: "?") */
};

/* Rank 0 listens on INADDR_ANY:port and waits until all world - 1 other ranks have said
 * hello, checks each (same world, rank in range and not seen before, same check string),
 * then sends every rank the blob: on rank 0, blob/len are in (len <= BP_RDV_MAX_BLOB); on
 * the others, blob (cap bytes) and *len are out. World 1 returns at once (no sockets).
 *
 * Returns 0; -1 with err (a bad option, a mismatch, a stranger on the port, a socket
 * error: rank 0 sends its text to every rank that had said hello, which then return -1
 * with that text too); or BP_EXEC_TIMEOUT with err naming who never came: on rank 0
 * "ranks 3, 5 of 8 never connected to the rendezvous at host:port" (the other ranks get
 * the same text and code), on the others "rank 0 at host:port did not answer ...". */
int bp_rendezvous(const struct bp_rdv_opts *o, void *blob, size_t *len, size_t cap,
		  struct bp_error *err);

/* The first host of a Slurm hostlist ("node[01-04,07],gpu3" -> "node01",
 * "rack[1-2]-n[3,5]" -> "rack1-n3") into out (n bytes). The whole list is checked: -1 with
 * err when it is malformed (unbalanced or nested brackets, an empty host or range, a
 * descending range, anything but digits in a range) or out is too small. */
int bp_slurm_first_host(const char *list, char *out, size_t n, struct bp_error *err);

/* The first port of SLURM_STEP_RESV_PORTS ("12000-12001", "12005", "12000-12001,12010");
 * -1 with err when the text is malformed or a port is outside 1..65535. */
int bp_slurm_first_port(const char *ports, int *port, struct bp_error *err);

#endif
