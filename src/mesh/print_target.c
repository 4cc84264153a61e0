/* SPDX-License-Identifier: BSD-3-Clause */
/* Prints mesh_native_target(): the build uses it to lay out catalogs. */
#include "mesh/backend.h"

#include <stdio.h>

int main(void)
{
    return puts(mesh_native_target()) < 0 ? 1 : 0;
}
