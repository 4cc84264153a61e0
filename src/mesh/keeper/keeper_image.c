/* SPDX-License-Identifier: BSD-3-Clause */
/* The keeper's executable (keeper.c, built first), carried in librig.
 *
 * The build passes its path as MESH_KEEPER_PATH; the assembler includes the
 * file's bytes between mesh_keeper_image and mesh_keeper_image_end (hidden
 * symbols), which src/mesh/child.c writes into a memfd and executes. */
#ifndef MESH_KEEPER_PATH
#error "MESH_KEEPER_PATH names the keeper's executable"
#endif

__asm__(".pushsection .rodata\n"
        ".balign 64\n"
        ".globl mesh_keeper_image\n"
        ".hidden mesh_keeper_image\n"
        "mesh_keeper_image:\n"
        ".incbin \"" MESH_KEEPER_PATH "\"\n"
        ".globl mesh_keeper_image_end\n"
        ".hidden mesh_keeper_image_end\n"
        "mesh_keeper_image_end:\n"
        ".popsection\n");
