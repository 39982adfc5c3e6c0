/* Why a session ends on SIGTERM (session_end.c): the words of its GOODBYE
 * and the status it returns with. */
#ifndef DAEMON_SESSION_END_H
#define DAEMON_SESSION_END_H

/* The message for SIGTERM's GOODBYE, and into *status the exit status:
 * a worker_session_fail's, else the worker_session_set_term_reason one
 * (or the default) with status 0. Any thread. */
const char *session_end_reason(int *status);

/* After an end without an orderly GOODBYE: this process's names in
 * /dev/shm go now, when worker_session_set_reclaim_early asked for it. */
void session_end_reclaim(void);

#endif
