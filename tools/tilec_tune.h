/* `tilec tune` (tilec_tune.c): argv from "tune" on; returns the exit status. */
#ifndef TILE_TOOLS_TILEC_TUNE_H
#define TILE_TOOLS_TILEC_TUNE_H

int tilec_tune_main(int argc, char **argv);

#endif
