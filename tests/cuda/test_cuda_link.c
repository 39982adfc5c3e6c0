/* The core library never links CUDA: libstrata.so's DT_NEEDED entries, and
 * everything ldd resolves for it, name no libcuda, libcudart or libnccl.
 * The plug-in loads the driver with dlopen() too, so it needs none of them
 * either (nor libstrata: it takes what it needs from its host). */
#include <elf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#define MAX_NEEDED 64

static const char *const forbidden[] = {"libcuda.", "libcudart", "libnccl",
                                        "libnvidia"};

static char *read_file(const char *path, size_t *len_out)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long len;

    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    len = ftell(f);
    assert_true(len > (long)sizeof(Elf64_Ehdr));
    rewind(f);
    buf = malloc((size_t)len);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *len_out = (size_t)len;
    return buf;
}

static bool in_file(size_t len, uint64_t off, uint64_t size)
{
    return off <= len && size <= len - off;
}

/* Copies the DT_NEEDED names of the ELF shared object at path into
 * needed (each a pointer into *buf_out, which the caller frees). */
static size_t dt_needed(const char *path, const char **needed, char **buf_out)
{
    size_t len, n = 0;
    char *buf = read_file(path, &len);
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)buf;
    const Elf64_Shdr *sh;

    assert_memory_equal(eh->e_ident, ELFMAG, SELFMAG);
    assert_int_equal(eh->e_ident[EI_CLASS], ELFCLASS64);
    assert_true(
        in_file(len, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr)));
    sh = (const Elf64_Shdr *)(buf + eh->e_shoff);
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        const Elf64_Shdr *str;

        if (sh[i].sh_type != SHT_DYNAMIC)
            continue;
        assert_true(sh[i].sh_link < eh->e_shnum);
        str = &sh[sh[i].sh_link];
        assert_true(in_file(len, sh[i].sh_offset, sh[i].sh_size));
        assert_true(in_file(len, str->sh_offset, str->sh_size));
        for (uint64_t off = 0; off + sizeof(Elf64_Dyn) <= sh[i].sh_size;
             off += sizeof(Elf64_Dyn)) {
            const Elf64_Dyn *d =
                (const Elf64_Dyn *)(buf + sh[i].sh_offset + off);

            if (d->d_tag == DT_NULL)
                break;
            if (d->d_tag != DT_NEEDED)
                continue;
            assert_true(d->d_un.d_val < str->sh_size);
            assert_true(n < MAX_NEEDED);
            needed[n++] = buf + str->sh_offset + d->d_un.d_val;
        }
    }
    *buf_out = buf;
    return n;
}

static void assert_no_cuda_needed(const char *path, const char *also)
{
    const char *needed[MAX_NEEDED];
    char *buf;
    size_t n = dt_needed(path, needed, &buf);

    assert_true(n > 0); /* libc at least: the parser found the section */
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < sizeof(forbidden) / sizeof(forbidden[0]); j++)
            if (strstr(needed[i], forbidden[j]))
                fail_msg("%s needs %s", path, needed[i]);
        if (also && strstr(needed[i], also))
            fail_msg("%s needs %s", path, needed[i]);
    }
    free(buf);
}

/* What the dynamic loader would bring in, transitively. */
static void assert_ldd_clean(const char *path)
{
    char cmd[4200], line[1024];
    FILE *p;
    int lines = 0;

    snprintf(cmd, sizeof(cmd), "ldd '%s' 2>&1", path);
    p = popen(cmd, "r");
    assert_non_null(p);
    while (fgets(line, sizeof(line), p)) {
        lines++;
        for (size_t j = 0; j < sizeof(forbidden) / sizeof(forbidden[0]); j++)
            if (strstr(line, forbidden[j]))
                fail_msg("ldd %s: %s", path, line);
    }
    assert_int_equal(pclose(p), 0);
    assert_true(lines > 0);
}

static void test_cuda_link_libstrata_needs_no_cuda(void **state)
{
    (void)state;
    assert_no_cuda_needed(STRATA_LIB_PATH, NULL);
    assert_ldd_clean(STRATA_LIB_PATH);
}

static void test_cuda_link_plugin_needs_no_cuda_nor_strata(void **state)
{
    (void)state;
    if (!STRATA_CUDA_PLUGIN_PATH[0])
        skip(); /* not built here (STRATA_CUDA=AUTO without a toolkit) */
    assert_no_cuda_needed(STRATA_CUDA_PLUGIN_PATH, "libstrata");
    assert_ldd_clean(STRATA_CUDA_PLUGIN_PATH);
}

/* The checker can fail: a library that does need libcudart is caught. */
static void test_cuda_link_checker_sees_cudart(void **state)
{
    const char *needed[MAX_NEEDED];
    char *buf;
    bool seen = false;
    size_t n;

    (void)state;
    if (!STRATA_CUDART_CONSUMER[0])
        skip();
    n = dt_needed(STRATA_CUDART_CONSUMER, needed, &buf);
    for (size_t i = 0; i < n; i++)
        seen = seen || strstr(needed[i], "libcudart") != NULL;
    free(buf);
    assert_true(seen);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuda_link_libstrata_needs_no_cuda),
        cmocka_unit_test(test_cuda_link_plugin_needs_no_cuda_nor_strata),
        cmocka_unit_test(test_cuda_link_checker_sees_cudart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
