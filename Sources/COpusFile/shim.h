#ifndef PARTYCAST_COPUSFILE_SHIM_H
#define PARTYCAST_COPUSFILE_SHIM_H
#include <opusfile.h>
#endif
