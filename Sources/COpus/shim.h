#ifndef PARTYCAST_COPUS_SHIM_H
#define PARTYCAST_COPUS_SHIM_H
#include <opus.h>
// The CTL macros are variadic and invisible to Swift; these wrappers expose the few we set.
static inline int partycast_opus_set_bitrate(OpusEncoder *e, opus_int32 bps) { return opus_encoder_ctl(e, OPUS_SET_BITRATE(bps)); }
static inline int partycast_opus_set_complexity(OpusEncoder *e, opus_int32 c) { return opus_encoder_ctl(e, OPUS_SET_COMPLEXITY(c)); }
static inline int partycast_opus_get_lookahead(OpusEncoder *e, opus_int32 *out) { return opus_encoder_ctl(e, OPUS_GET_LOOKAHEAD(out)); }
#endif
