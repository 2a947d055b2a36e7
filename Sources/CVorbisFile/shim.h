#ifndef PARTYCAST_CVORBISFILE_SHIM_H
#define PARTYCAST_CVORBISFILE_SHIM_H
// The header's static stdio callback tables would be unused copies in every importer.
#define OV_EXCLUDE_STATIC_CALLBACKS
#include <vorbis/vorbisfile.h>
#endif
