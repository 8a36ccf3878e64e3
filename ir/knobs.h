/* The compiler's knobs (ir/knobs.def): settings that change generated code, carried by
 * the module, filled by the compile driver, hashed into every cache key. */
#ifndef TILE_IR_KNOBS_H
#define TILE_IR_KNOBS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct TileKnobs {
#define TILE_KNOB(name, env, def, min, max, words, doc) int name;
#include "ir/knobs.def"
#undef TILE_KNOB
} TileKnobs;

/* Every knob at its default. */
TileKnobs tile_knobs_default(void);
/* Sets knob `name` from `value` (an integer in its range, or one of its words). false
 * with a message in why (naming the knob, the value and what it takes) otherwise. */
bool tile_knobs_set(TileKnobs *k, const char *name, const char *value, char *why, size_t n);
/* Overrides the defaults in k from the environment (TILE_SINK=0, ...). Called once by
 * a driver, never by a pass. false with a message for a value out of range. */
bool tile_knobs_from_env(TileKnobs *k, char *why, size_t n);
/* "tma=1 tma_early=0 ...": every knob in table order; what cache keys hash. Returns
 * the length written (as snprintf). */
int tile_knobs_text(const TileKnobs *k, char *buf, size_t n);
/* The names of every knob, for messages ("tma, tma_early, ..."). */
const char *tile_knobs_names(void);

/* The compiler's identity: a hash of the sources of every library that makes code
 * (frontend, ir, passes, codegen, runtime), taken at build time, and the LLVM version
 * it was built against ("src-1f2e...-llvm-19.1.7"). Cache keys name it, so no entry of
 * one build is ever served to another. */
const char *tile_compiler_id(void);

#endif
