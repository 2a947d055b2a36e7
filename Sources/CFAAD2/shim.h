#ifndef PARTYCAST_CFAAD2_SHIM_H
#define PARTYCAST_CFAAD2_SHIM_H
#include <neaacdec.h>
#endif
