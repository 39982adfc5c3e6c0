/* One-line logs to stderr, filtered by STRATA_LOG=error|warn|info|debug
 * (default warn), each prefixed with the process role ("l3", "chip[0]"). */
#ifndef BASE_LOG_H
#define BASE_LOG_H

#include <strata/strata.h>

enum base_log_level {
    BASE_LOG_ERROR = 0,
    BASE_LOG_WARN = 1,
    BASE_LOG_INFO = 2,
    BASE_LOG_DEBUG = 3,
};

/* Sets this process's role label (copied; after fork, in the child). */
void base_log_set_role(const char *fmt, ...) STRATA_PRINTF(1, 2);
int base_log_enabled(enum base_log_level level);
void base_log(enum base_log_level level, const char *fmt, ...)
    STRATA_PRINTF(2, 3);

#define BASE_LOG(level, ...)                                                   \
    do {                                                                       \
        if (base_log_enabled(level))                                           \
            base_log(level, __VA_ARGS__);                                      \
    } while (0)
#define LOG_ERROR(...) BASE_LOG(BASE_LOG_ERROR, __VA_ARGS__)
#define LOG_WARN(...) BASE_LOG(BASE_LOG_WARN, __VA_ARGS__)
#define LOG_INFO(...) BASE_LOG(BASE_LOG_INFO, __VA_ARGS__)
#define LOG_DEBUG(...) BASE_LOG(BASE_LOG_DEBUG, __VA_ARGS__)

#endif
