/* common_ucx.h includes the source-tree path opal/include/opal/constants.h;
 * the installed tree flattens it to opal/constants.h. */
#include "opal/constants.h"
