/* The environment every MPI group test runs mpirun in: root allowed for
 * this process and its jobs only, and Open MPI's shared-memory segments
 * in a folder of the test's own (a killed job leaves vader_segment.*
 * files behind; there they are removed at the end, never mixed with
 * other jobs'). */
#ifndef STRATA_MT_ENV_H
#define STRATA_MT_ENV_H

/* Sets the environment up, then rk_register(). 0 or -1. */
int mt_env_setup(void);
/* Removes the segment folder and everything in it. */
void mt_env_teardown(void);

#endif
