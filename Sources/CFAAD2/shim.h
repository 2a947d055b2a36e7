#ifndef PARTYCAST_CFAAD2_SHIM_H
#define PARTYCAST_CFAAD2_SHIM_H
#include <neaacdec.h>
#include "../CLazyLibrary/lazy_library.h"

/* The libfaad functions PartyCast calls, resolved at their first use rather than at start-up:
   only an AAC stream maps libfaad. */
#define PARTYCAST_FAAD_FUNCTIONS(F) \
    F(NeAACDecOpen) \
    F(NeAACDecClose) \
    F(NeAACDecDecode) \
    F(NeAACDecGetCurrentConfiguration) \
    F(NeAACDecSetConfiguration) \
    F(NeAACDecInit)

PARTYCAST_LAZY_LIBRARY(PartyCastFAADFunctions, partycast_faad_open, "libfaad.so.2", PARTYCAST_FAAD_FUNCTIONS)

#endif
