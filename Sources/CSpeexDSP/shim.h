#ifndef PARTYCAST_CSPEEXDSP_SHIM_H
#define PARTYCAST_CSPEEXDSP_SHIM_H
#include <speex/speex_resampler.h>
#endif
