/* `tilec cache ls|stats|verify|prune|clear`: looking inside the persistent cache. */
#ifndef TILE_RUNTIME_RT_CACHE_CLI_H
#define TILE_RUNTIME_RT_CACHE_CLI_H

/* argv[0] is "cache", argv[1] the verb. Prints to stdout, errors to stderr. Returns the
 * exit status: 0 success, 1 a problem found or an error, 2 a usage error. */
int trt_cache_cli(int argc, char **argv);

#endif
