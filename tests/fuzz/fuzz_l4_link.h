/* fuzz_l4_link: what the harness (fuzz_l4_link.c) and its seeds
 * (fuzz_l4_seeds.c) share. */
#ifndef FUZZ_L4_LINK_H
#define FUZZ_L4_LINK_H

#define FUZZ_L4_CHIPS 2     /* the remote node's chips, 0 and 1 */
#define FUZZ_L4_HERE "here" /* HELLO_REPLY: this host's name or boot id */

/* Writes the seed corpus to dir (made if missing); exits on failure. */
void fuzz_l4_write_seeds(const char *dir);

#endif
