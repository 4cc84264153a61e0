/* SPDX-License-Identifier: BSD-3-Clause */
/* The CUDA compiler: PTX of a payload to a cubin with nvJitLink.
 *
 * prepare checks the manifest (mesh_check_manifest, then the device's
 * limits when the compiler knows them), the hash, finds the PTX the
 * manifest names, compiles it for the arch with -maxrregcount=<reg_cap>,
 * and reads the cubin back: the entry kernel must be in it, and
 * MESH_RT_ABI must be defined with this runtime's value, so that an image
 * built for another ABI is refused here ("abi: ") on a machine without a
 * GPU as well as at load.  The cubin reader is a minimal ELF64 walk: the
 * register count is the EIATTR_REGCOUNT attribute of .nv.info (else the
 * high byte of the kernel's .text section's sh_info, where ptxas also
 * records it).  The compile asks for nvJitLink's -verbose info log, whose
 * ptxas lines give the entry's registers, static shared memory and stack
 * frame: kept with the prepared program, they let the backend admit or
 * refuse it without loading a module. */
#include "cuda_internal.h"

#include "../../util/util_internal.h"

#include <ctype.h>
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- nvJitLink ---------------------------------------------------------- */

static char *njl_log(const mesh_njl_lib *j, nvJitLinkHandle h, bool error)
{
    size_t n = 0;
    nvJitLinkResult r =
        error ? j->GetErrorLogSize(h, &n) : j->GetInfoLogSize(h, &n);
    if (r != NVJITLINK_SUCCESS) {
        return NULL;
    }
    char *log = malloc(n + 1);
    if (log == NULL) {
        return NULL;
    }
    log[0] = '\0';
    if (n > 0 && (error ? j->GetErrorLog(h, log) : j->GetInfoLog(h, log)) !=
                     NVJITLINK_SUCCESS) {
        log[0] = '\0';
    }
    log[n] = '\0';
    /* One message line per error: trailing newlines go. */
    size_t len = strlen(log);
    while (len > 0 && (log[len - 1] == '\n' || log[len - 1] == '\r')) {
        log[--len] = '\0';
    }
    return log;
}

bool mesh_njl_compile(const mesh_njl_lib *j, const char *arch, uint32_t reg_cap,
                      const char *name, const void *ptx, size_t len,
                      uint8_t **cubin, size_t *cubin_len, char **info,
                      char **err)
{
    if (j == NULL || j->lib == NULL || arch == NULL || name == NULL ||
        ptx == NULL || cubin == NULL || cubin_len == NULL) {
        return rig_err(err, "invalid: mesh_njl_compile: NULL argument");
    }
    char opt_arch[32], opt_regs[32];
    const char *opts[3];
    uint32_t nopts = 0;
    snprintf(opt_arch, sizeof(opt_arch), "-arch=%s", arch);
    opts[nopts++] = opt_arch;
    if (reg_cap != 0) {
        snprintf(opt_regs, sizeof(opt_regs), "-maxrregcount=%u", reg_cap);
        opts[nopts++] = opt_regs;
    }
    if (info != NULL) {
        opts[nopts++] = "-verbose"; /* ptxas's resource lines in the log */
    }
    /* nvJitLink reads PTX as text: hand it a terminated copy. */
    char *text = malloc(len + 1);
    if (text == NULL) {
        return rig_err(err, "nomem: %zu bytes of PTX", len);
    }
    memcpy(text, ptx, len);
    text[len] = '\0';
    bool ok = false;
    char *log = NULL;
    nvJitLinkHandle h = NULL;
    nvJitLinkResult r = j->Create(&h, nopts, opts);
    if (r != NVJITLINK_SUCCESS) {
        mesh_njl_check(r, "compile", "nvJitLinkCreate", NULL, err);
        goto out_free;
    }
    r = j->AddData(h, NVJITLINK_INPUT_PTX, text, len + 1, name);
    if (r != NVJITLINK_SUCCESS) {
        log = njl_log(j, h, true);
        mesh_njl_check(r, "compile", "nvJitLinkAddData", log, err);
        goto out_destroy;
    }
    r = j->Complete(h);
    if (r != NVJITLINK_SUCCESS) {
        log = njl_log(j, h, true);
        mesh_njl_check(r, "compile", "nvJitLinkComplete", log, err);
        goto out_destroy;
    }
    size_t n = 0;
    r = j->GetLinkedCubinSize(h, &n);
    if (r != NVJITLINK_SUCCESS || n == 0) {
        mesh_njl_check(r != NVJITLINK_SUCCESS ? r : NVJITLINK_ERROR_INTERNAL,
                       "compile", "nvJitLinkGetLinkedCubinSize", NULL, err);
        goto out_destroy;
    }
    uint8_t *bin = malloc(n);
    if (bin == NULL) {
        rig_err(err, "nomem: a cubin of %zu bytes", n);
        goto out_destroy;
    }
    r = j->GetLinkedCubin(h, bin);
    if (r != NVJITLINK_SUCCESS) {
        free(bin);
        mesh_njl_check(r, "compile", "nvJitLinkGetLinkedCubin", NULL, err);
        goto out_destroy;
    }
    if (info != NULL) {
        *info = njl_log(j, h, false);
    }
    *cubin = bin;
    *cubin_len = n;
    ok = true;
out_destroy:
    j->Destroy(&h);
out_free:
    free(log);
    free(text);
    return ok;
}

/* The decimal number that ends just before at (at > start), or 0. */
static uint32_t number_before(const char *start, const char *at)
{
    const char *d = at;
    while (d > start && isdigit((unsigned char)d[-1])) {
        d--;
    }
    unsigned long v = d < at ? strtoul(d, NULL, 10) : 0;
    return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

bool mesh_njl_usage_parse(const char *log, const char *kernel,
                          mesh_njl_usage *out)
{
    if (log == NULL || kernel == NULL || kernel[0] == '\0' || out == NULL) {
        return false;
    }
    static const char entry[] = "Compiling entry function '";
    static const char props[] = "Function properties for ";
    size_t klen = strlen(kernel);
    mesh_njl_usage u = {0};
    bool in_entry = false, in_props = false;
    char line[512];
    for (const char *p = log; *p != '\0';) {
        size_t n = strcspn(p, "\n");
        /* Longer lines are none of ptxas's resource lines. */
        if (n >= sizeof(line)) {
            n = 0;
        }
        memcpy(line, p, n);
        line[n] = '\0';
        p += strcspn(p, "\n");
        p += *p == '\n';
        const char *at = strstr(line, entry);
        if (at != NULL) {
            at += sizeof(entry) - 1;
            in_entry = strncmp(at, kernel, klen) == 0 && at[klen] == '\'';
            in_props = false;
            continue;
        }
        if (!in_entry) {
            continue;
        }
        /* ptxas names the function bare; the linker's summary that follows
         * quotes it (and says "used", lower case): only ptxas's lines count. */
        if ((at = strstr(line, props)) != NULL) {
            in_props = strcmp(at + sizeof(props) - 1, kernel) == 0;
        } else if (in_props &&
                   (at = strstr(line, " bytes stack frame")) != NULL) {
            u.stack = number_before(line, at);
            in_props = false;
        } else if ((at = strstr(line, ": Used ")) != NULL) {
            if (sscanf(at, ": Used %u registers", &u.regs) != 1) {
                return false;
            }
            const char *smem = strstr(at, " bytes smem");
            if (smem != NULL) {
                u.shared = number_before(at, smem);
            }
            *out = u;
            return true;
        }
    }
    return false;
}

/* ---- the cubin ---------------------------------------------------------- */

#define EIFMT_SVAL 0x04u
#define EIATTR_REGCOUNT 0x2fu

typedef struct {
    const uint8_t *b;
    size_t len;
    const Elf64_Ehdr *eh;
    const Elf64_Shdr *sh;
    const char *shstr;
    size_t shstr_len;
} elf_view;

static bool in_bounds(size_t len, uint64_t off, uint64_t n)
{
    return off <= len && n <= len - off;
}

static bool elf_open(elf_view *v, const uint8_t *b, size_t len, char **err)
{
    if (len < sizeof(Elf64_Ehdr) || memcmp(b, ELFMAG, SELFMAG) != 0 ||
        b[EI_CLASS] != ELFCLASS64) {
        return rig_err(err, "compile: the image is not a 64-bit ELF cubin");
    }
    /* The compiler's output is malloc'd: aligned for these structs. */
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)b;
    if (eh->e_shentsize != sizeof(Elf64_Shdr) ||
        !in_bounds(len, eh->e_shoff,
                   (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr)) ||
        eh->e_shoff % 8 != 0 || eh->e_shstrndx >= eh->e_shnum) {
        return rig_err(err, "compile: the cubin's section table is "
                            "malformed");
    }
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(b + eh->e_shoff);
    const Elf64_Shdr *ss = &sh[eh->e_shstrndx];
    if (!in_bounds(len, ss->sh_offset, ss->sh_size)) {
        return rig_err(err, "compile: the cubin's section names are "
                            "malformed");
    }
    v->b = b;
    v->len = len;
    v->eh = eh;
    v->sh = sh;
    v->shstr = (const char *)b + ss->sh_offset;
    v->shstr_len = ss->sh_size;
    return true;
}

static const char *elf_str(const char *tab, size_t tab_len, uint32_t off)
{
    if (off >= tab_len || memchr(tab + off, '\0', tab_len - off) == NULL) {
        return "";
    }
    return tab + off;
}

static const char *sec_name(const elf_view *v, const Elf64_Shdr *s)
{
    return elf_str(v->shstr, v->shstr_len, s->sh_name);
}

/* Finds symbol name in .symtab: its index and entry. */
static bool find_sym(const elf_view *v, const char *name, uint32_t *index,
                     const Elf64_Sym **sym)
{
    for (uint16_t i = 0; i < v->eh->e_shnum; i++) {
        const Elf64_Shdr *s = &v->sh[i];
        if (s->sh_type != SHT_SYMTAB || s->sh_entsize != sizeof(Elf64_Sym) ||
            !in_bounds(v->len, s->sh_offset, s->sh_size) ||
            s->sh_offset % 8 != 0 || s->sh_link >= v->eh->e_shnum) {
            continue;
        }
        const Elf64_Shdr *st = &v->sh[s->sh_link];
        if (!in_bounds(v->len, st->sh_offset, st->sh_size)) {
            continue;
        }
        const char *strs = (const char *)v->b + st->sh_offset;
        const Elf64_Sym *syms = (const Elf64_Sym *)(v->b + s->sh_offset);
        size_t n = s->sh_size / sizeof(Elf64_Sym);
        for (size_t k = 0; k < n; k++) {
            if (strcmp(elf_str(strs, st->sh_size, syms[k].st_name), name) ==
                0) {
                *index = (uint32_t)k;
                *sym = &syms[k];
                return true;
            }
        }
    }
    return false;
}

/* EIATTR_REGCOUNT of symbol sym in any .nv.info* section. */
static bool regs_from_info(const elf_view *v, uint32_t sym, uint32_t *regs)
{
    for (uint16_t i = 0; i < v->eh->e_shnum; i++) {
        const Elf64_Shdr *s = &v->sh[i];
        if (strncmp(sec_name(v, s), ".nv.info", 8) != 0 ||
            !in_bounds(v->len, s->sh_offset, s->sh_size)) {
            continue;
        }
        const uint8_t *p = v->b + s->sh_offset;
        size_t n = s->sh_size, at = 0;
        while (at + 4 <= n) {
            uint8_t fmt = p[at], attr = p[at + 1];
            size_t size = 0;
            if (fmt == EIFMT_SVAL) {
                size = (size_t)p[at + 2] | ((size_t)p[at + 3] << 8);
            }
            if (at + 4 + size > n) {
                break;
            }
            if (fmt == EIFMT_SVAL && attr == EIATTR_REGCOUNT && size >= 8) {
                uint32_t w[2];
                memcpy(w, p + at + 4, sizeof(w));
                if (w[0] == sym) {
                    *regs = w[1];
                    return true;
                }
            }
            at += 4 + size;
        }
    }
    return false;
}

/* The high byte of .text.<kernel>'s sh_info. */
static bool regs_from_text(const elf_view *v, const char *kernel,
                           uint32_t *regs)
{
    for (uint16_t i = 0; i < v->eh->e_shnum; i++) {
        const char *n = sec_name(v, &v->sh[i]);
        if (strncmp(n, ".text.", 6) == 0 && strcmp(n + 6, kernel) == 0) {
            *regs = v->sh[i].sh_info >> 24;
            return true;
        }
    }
    return false;
}

bool mesh_cubin_inspect(const uint8_t *cubin, size_t len, const char *kernel,
                        mesh_cubin_info *out, char **err)
{
    if (cubin == NULL || kernel == NULL || out == NULL) {
        return rig_err(err, "invalid: mesh_cubin_inspect: NULL argument");
    }
    elf_view v;
    if (!elf_open(&v, cubin, len, err)) {
        return false;
    }
    mesh_cubin_info info = {0};
    uint32_t index = 0;
    const Elf64_Sym *sym = NULL;
    if (!find_sym(&v, kernel, &index, &sym) ||
        ELF64_ST_TYPE(sym->st_info) != STT_FUNC) {
        return rig_err(err, "compile: the image has no kernel %s", kernel);
    }
    if (!regs_from_info(&v, index, &info.regs) &&
        !regs_from_text(&v, kernel, &info.regs)) {
        return rig_err(err,
                       "compile: the cubin records no register count "
                       "for kernel %s",
                       kernel);
    }
    if (find_sym(&v, "MESH_RT_ABI", &index, &sym) &&
        ELF64_ST_TYPE(sym->st_info) == STT_OBJECT &&
        sym->st_shndx < v.eh->e_shnum) {
        const Elf64_Shdr *s = &v.sh[sym->st_shndx];
        info.has_abi = true;
        uint64_t at = sym->st_value >= s->sh_addr ? sym->st_value - s->sh_addr
                                                  : sym->st_value;
        if (s->sh_type == SHT_NOBITS) {
            info.abi = 0;
        } else if (in_bounds(s->sh_size, at, 4) &&
                   in_bounds(v.len, s->sh_offset + at, 4)) {
            memcpy(&info.abi, v.b + s->sh_offset + at, 4);
        } else {
            return rig_err(err, "compile: MESH_RT_ABI lies outside its "
                                "section");
        }
    }
    *out = info;
    return true;
}

/* ---- the compiler ------------------------------------------------------- */

typedef struct {
    mesh_compiler pub;
    mesh_njl_lib njl;
    char arch[16];
    mesh_cuda_limits lim;
} cuda_compiler;

static bool arch_ok(const char *a)
{
    size_t n = a != NULL ? strlen(a) : 0;
    if (n < 5 || n > 8 || strncmp(a, "sm_", 3) != 0) {
        return false;
    }
    size_t d = 3;
    while (d < n && isdigit((unsigned char)a[d])) {
        d++;
    }
    return d - 3 >= 2 && d - 3 <= 3 &&
           (d == n || (d + 1 == n && islower((unsigned char)a[d])));
}

static bool cuda_needs_ptx(const mesh_compiler *c)
{
    (void)c;
    return true;
}

static bool check_limits(const cuda_compiler *cc, const mesh_manifest *m,
                         char **err)
{
    if (cc->lim.max_threads != 0 && m->threads > cc->lim.max_threads) {
        return rig_err(err,
                       "limits: program %s asks for %u threads per "
                       "node; this GPU allows %u",
                       m->name, m->threads, cc->lim.max_threads);
    }
    if (cc->lim.max_shared != 0 && m->shared > cc->lim.max_shared) {
        return rig_err(err,
                       "limits: program %s asks for %u bytes of shared "
                       "memory per node; this GPU allows %u",
                       m->name, m->shared, cc->lim.max_shared);
    }
    return true;
}

static bool cuda_prepare(const mesh_compiler *c, mesh_payload *src,
                         const uint64_t *expect, const char *root,
                         mesh_prepared *out, char **err)
{
    (void)root; /* the payload holds every byte: nothing is read from disk */
    if (src == NULL) {
        return rig_err(err, "invalid: cuda prepare: src is NULL");
    }
    if (c == NULL || c->self == NULL || out == NULL) {
        mesh_payload_free(src);
        return rig_err(err, "invalid: cuda prepare: NULL argument");
    }
    const cuda_compiler *cc = c->self;
    mesh_manifest m;
    if (!mesh_check_manifest(src, MESH_BACKEND_CUDA, &m, err)) {
        mesh_payload_free(src);
        return false;
    }
    uint8_t *cubin = NULL;
    size_t cubin_len = 0;
    uint64_t hash = mesh_payload_hash(src);
    if (expect != NULL && *expect != hash) {
        rig_err(err, "hash: program %s hashes to %016llx, expected %016llx",
                m.name, (unsigned long long)hash, (unsigned long long)*expect);
        goto err_free;
    }
    if (!check_limits(cc, &m, err)) {
        goto err_free;
    }
    const mesh_payload_file *f = mesh_payload_find(src, m.ptx);
    if (f == NULL) {
        rig_err(err, "missing: program %s has no PTX file %s", m.name, m.ptx);
        goto err_free;
    }
    uint64_t t0 = rig_now_ns();
    char *log = NULL;
    if (!mesh_njl_compile(&cc->njl, cc->arch, m.reg_cap, m.ptx, f->data, f->len,
                          &cubin, &cubin_len, &log, err)) {
        rig_err_wrap(err, "program %s for %s", m.name, cc->arch);
        goto err_free;
    }
    double ms = (double)(rig_now_ns() - t0) / 1e6;
    /* ptxas's account of the entry, for the backend's admission check;
     * none (regs 0) where the log's format is not understood. */
    mesh_njl_usage use = {0};
    mesh_njl_usage_parse(log, m.entry, &use);
    free(log);
    /* The per-block limit counts the kernel's static shared memory too:
     * "The sum of this value [the dynamic size] and the function attribute
     * CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES cannot exceed the device
     * attribute CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"
     * (cuda.h, cuFuncSetAttribute). */
    if (cc->lim.max_shared != 0 &&
        (uint64_t)m.shared + use.shared > cc->lim.max_shared) {
        rig_err(err,
                "limits: program %s asks for %u bytes of shared memory per "
                "node and its kernel %s has %u more of its own; this GPU "
                "allows %u in all",
                m.name, m.shared, m.entry, use.shared, cc->lim.max_shared);
        goto err_free;
    }
    mesh_cubin_info info;
    if (!mesh_cubin_inspect(cubin, cubin_len, m.entry, &info, err)) {
        rig_err_wrap(err, "program %s", m.name);
        goto err_free;
    }
    if (!info.has_abi) {
        rig_err(err, "abi: program %s's image defines no MESH_RT_ABI", m.name);
        goto err_free;
    }
    if (info.abi != MESH_RT_ABI_VERSION) {
        rig_err(err,
                "abi: program %s's image has MESH_RT_ABI %u; this "
                "runtime is %u",
                m.name, info.abi, MESH_RT_ABI_VERSION);
        goto err_free;
    }
    memset(out, 0, sizeof(*out));
    out->manifest = m;
    out->hash = hash;
    out->code = cubin;
    out->code_len = cubin_len;
    out->compile_ms = ms;
    out->src = *src;
    memset(src, 0, sizeof(*src));
    out->kernel = NULL;
    out->exec = MESH_BACKEND_CUDA;
    out->reg_cap = m.reg_cap;
    /* The cubin's EIATTR_REGCOUNT is what the driver allocates; ptxas's
     * log says the same, and where they ever differ the larger is the one
     * an admission check must assume. */
    out->regs = use.regs != 0 && info.regs > use.regs ? info.regs : use.regs;
    out->shared_static = use.shared;
    out->local_bytes = use.stack;
    return true;
err_free:
    free(cubin);
    mesh_manifest_free(&m);
    mesh_payload_free(src);
    return false;
}

static const mesh_compiler_ops cuda_compiler_ops = {
    .needs_ptx = cuda_needs_ptx,
    .prepare = cuda_prepare,
};

bool mesh_cuda_compiler_make(const char *arch, const char *njl_dir,
                             const mesh_cuda_limits *lim, mesh_compiler **out,
                             char **err)
{
    if (out == NULL) {
        return rig_err(err, "invalid: mesh_cuda_compiler_open: out is NULL");
    }
    if (!arch_ok(arch)) {
        return rig_err(err, "invalid: CUDA arch \"%s\" is not sm_<NN>",
                       arch != NULL ? arch : "(null)");
    }
    cuda_compiler *cc = calloc(1, sizeof(*cc));
    if (cc == NULL) {
        return rig_err(err, "nomem: a CUDA compiler");
    }
    if (!mesh_njl_lib_open(&cc->njl, njl_dir, err)) {
        free(cc);
        return false;
    }
    snprintf(cc->arch, sizeof(cc->arch), "%s", arch);
    if (lim != NULL) {
        cc->lim = *lim;
    }
    cc->pub.ops = &cuda_compiler_ops;
    cc->pub.self = cc;
    *out = &cc->pub;
    return true;
}

void mesh_cuda_compiler_version(const mesh_compiler *c, unsigned *major,
                                unsigned *minor)
{
    const cuda_compiler *cc = c != NULL ? c->self : NULL;
    mesh_njl_version(cc != NULL ? &cc->njl : NULL, major, minor);
}

bool mesh_cuda_compiler_open(const char *arch, const char *nvjitlink_dir,
                             mesh_compiler **out, char **err)
{
    return mesh_cuda_compiler_make(arch, nvjitlink_dir, NULL, out, err);
}

void mesh_cuda_compiler_close(mesh_compiler *c)
{
    if (c == NULL || c->self == NULL) {
        return;
    }
    cuda_compiler *cc = c->self;
    mesh_njl_lib_close(&cc->njl);
    free(cc);
}
