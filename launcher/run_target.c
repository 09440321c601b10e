/* run_target.c - finds the program `tpaudit run` will start (a PATH search
 * like execvp's) and tells whether the dynamic loader will preload the shim
 * into it: not into a statically linked program (no PT_INTERP), a program
 * of the other ELF class, or one the kernel runs in secure-execution mode
 * (setuid or setgid to another user or group, file capabilities), where
 * LD_PRELOAD is ignored. A "#!" script is judged by its interpreter
 * (through `env` as well). */
#define _GNU_SOURCE
#include "run_parts.h"

#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#if UINTPTR_MAX > 0xffffffffu
typedef Elf64_Ehdr elf_ehdr;
typedef Elf64_Phdr elf_phdr;
#else
typedef Elf32_Ehdr elf_ehdr;
typedef Elf32_Phdr elf_phdr;
#endif

static int runnable_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && access(path, X_OK) == 0;
}

int tpa_run_resolve(const char *cmd, char *path, size_t len) {
    if (!*cmd) return -1;
    if (strchr(cmd, '/')) {
        if ((size_t)snprintf(path, len, "%s", cmd) >= len) return -1;
        return runnable_file(path) ? 0 : -1;
    }
    const char *dirs = getenv("PATH");
    if (!dirs) dirs = "/bin:/usr/bin"; /* execvp's default */
    while (*dirs) {
        const char *end = strchr(dirs, ':');
        size_t n = end ? (size_t)(end - dirs) : strlen(dirs);
        int w = n ? snprintf(path, len, "%.*s/%s", (int)n, dirs, cmd) : snprintf(path, len, "%s", cmd);
        if (w > 0 && (size_t)w < len && runnable_file(path)) return 0;
        dirs += n + (end ? 1 : 0);
    }
    return -1;
}

/* The kernel sets AT_SECURE (and the loader ignores LD_PRELOAD) when exec
 * changes the effective user or group, or grants file capabilities. */
static int secure_exec(const char *path, const struct stat *sb, char *why, size_t len) {
    struct statvfs fs;
    int nosuid = statvfs(path, &fs) == 0 && (fs.f_flag & ST_NOSUID);
    if (!nosuid && (sb->st_mode & S_ISUID) && sb->st_uid != getuid()) {
        snprintf(why, len, "is setuid (runs as uid %u)", (unsigned)sb->st_uid);
        return 1;
    }
    if (!nosuid && (sb->st_mode & S_ISGID) && sb->st_gid != getgid()) {
        snprintf(why, len, "is setgid (runs as gid %u)", (unsigned)sb->st_gid);
        return 1;
    }
    if (!nosuid && getxattr(path, "security.capability", NULL, 0) > 0) {
        snprintf(why, len, "has file capabilities");
        return 1;
    }
    return 0;
}

/* ELF header and program headers: 1 with why when there is no PT_INTERP
 * or the class is not ours; 0 otherwise (or when unreadable: exec decides). */
static int elf_unloadable(int fd, const unsigned char *ident, char *why, size_t len) {
    int native = sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32;
    if (ident[EI_CLASS] != native) {
        snprintf(why, len, "is a %d-bit program (the shim is %d-bit)", ident[EI_CLASS] == ELFCLASS32 ? 32 : 64,
                 (int)(8 * sizeof(void *)));
        return 1;
    }
    elf_ehdr eh;
    if (pread(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh || eh.e_phentsize != sizeof(elf_phdr)) return 0;
    if (eh.e_phnum == 0 || eh.e_phnum > 4096) return 0;
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        elf_phdr ph;
        if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (uint64_t)i * sizeof ph)) != (ssize_t)sizeof ph) return 0;
        if (ph.p_type == PT_INTERP) return 0;
    }
    snprintf(why, len, "is statically linked");
    return 1;
}

/* "#!interp [arg]": the interpreter (or env's program) into `next`. */
static int script_interpreter(const char *line, char *next, size_t len) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", line + 2);
    buf[strcspn(buf, "\n")] = 0;
    char *save = NULL, *interp = strtok_r(buf, " \t", &save);
    if (!interp) return -1;
    const char *base = strrchr(interp, '/');
    if (strcmp(base ? base + 1 : interp, "env") == 0) {
        for (char *arg = strtok_r(NULL, " \t", &save); arg; arg = strtok_r(NULL, " \t", &save))
            if (arg[0] != '-') return tpa_run_resolve(arg, next, len);
    }
    if ((size_t)snprintf(next, len, "%s", interp) >= len) return -1;
    return 0;
}

static int judge(const char *path, int depth, char *why, size_t len) {
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return 0;
    char reason[160];
    if (secure_exec(path, &sb, reason, sizeof reason)) {
        snprintf(why, len, "%s %s", path, reason);
        return 1;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return 0;
    unsigned char head[256];
    ssize_t n = pread(fd, head, sizeof head - 1, 0);
    int verdict = 0;
    if (n >= EI_NIDENT && memcmp(head, ELFMAG, SELFMAG) == 0) {
        verdict = elf_unloadable(fd, head, reason, sizeof reason);
        if (verdict) snprintf(why, len, "%s %s", path, reason);
    } else if (n > 2 && head[0] == '#' && head[1] == '!' && depth < 3) {
        head[n] = 0;
        char interp[PATH_MAX];
        if (script_interpreter((const char *)head, interp, sizeof interp) == 0)
            verdict = judge(interp, depth + 1, why, len);
    }
    close(fd);
    return verdict;
}

int tpa_run_unpreloadable(const char *path, char *why, size_t len) { return judge(path, 0, why, len); }
