/*
 * ipc_util.h - real second processes for the IPC tests: a test program starts itself
 * again (posix_spawn of /proc/self/exe, so the child is a fresh process that has never
 * touched the mock: nothing crosses a fork) with "--child <role> [args]" and its own
 * environment, and talks to it through two pipes, one line per message.
 *
 *     mt_child c;
 *     mt_child_start(&c, "importer", env, "arg", (const char *)NULL);   // parent
 *     mt_child_send(&c, "key %s", key);  mt_child_recv(&c, line, sizeof line);
 *     CHECK_EQ(mt_child_wait(&c), 0);                                    // its exit code
 *
 *     int main(int argc, char **argv) {                                  // child side
 *         if (mt_is_child(argc, argv)) return run_child(argv[2], argc - 3, argv + 3);
 *     mt_parent_send("ready %d", x);  mt_parent_recv(line, sizeof line);
 *
 * `env` is a NULL-terminated list of "NAME=value" strings that replace or add to the
 * parent's environment ("NAME=" alone removes NAME). Every receive gives up after
 * MT_IPC_TIMEOUT_S seconds (returns -1), so a broken child fails the test instead of
 * hanging it.
 */
#ifndef MOCK_IPC_UTIL_H
#define MOCK_IPC_UTIL_H

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define MT_IPC_TIMEOUT_S 60
#define MT_CHILD_IN 3  /* the child reads the parent's lines here */
#define MT_CHILD_OUT 4 /* and writes its own here */

typedef struct mt_child {
    pid_t pid;
    int to;   /* parent -> child */
    int from; /* child -> parent */
} mt_child;

static inline int mt_is_child(int argc, char **argv)
{
    return argc >= 3 && strcmp(argv[1], "--child") == 0;
}

/* The environment of the child: the parent's with `env` applied. */
static inline char **mt_child_env_(const char *const *env)
{
    size_t n = 0, extra = 0;
    while (environ[n] != NULL) {
        n++;
    }
    while (env != NULL && env[extra] != NULL) {
        extra++;
    }
    char **out = (char **)calloc(n + extra + 1, sizeof(char *));
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int replaced = 0;
        for (size_t j = 0; j < extra; j++) {
            size_t len = (size_t)(strchr(env[j], '=') - env[j]) + 1;
            if (strncmp(environ[i], env[j], len) == 0) {
                replaced = 1;
            }
        }
        if (!replaced) {
            out[k++] = environ[i];
        }
    }
    for (size_t j = 0; j < extra; j++) {
        if (env[j][strlen(env[j]) - 1] != '=') {
            out[k++] = (char *)env[j];
        }
    }
    out[k] = NULL;
    return out;
}

/* Starts the child; the extra arguments end with a NULL. 0, or -1 after printing why. */
static inline int mt_child_start(mt_child *c, const char *role, const char *const *env, ...)
{
    int to[2], from[2];
    if (pipe(to) != 0 || pipe(from) != 0) {
        perror("pipe");
        return -1;
    }
    const char *argv[32];
    int argc = 0;
    argv[argc++] = "/proc/self/exe";
    argv[argc++] = "--child";
    argv[argc++] = role;
    va_list ap;
    va_start(ap, env);
    for (const char *a = va_arg(ap, const char *); a != NULL && argc < 31; a = va_arg(ap, const char *)) {
        argv[argc++] = a;
    }
    va_end(ap);
    argv[argc] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, to[0], MT_CHILD_IN);
    posix_spawn_file_actions_adddup2(&fa, from[1], MT_CHILD_OUT);
    char **envp = mt_child_env_(env);
    int rc = posix_spawn(&c->pid, "/proc/self/exe", &fa, NULL, (char *const *)argv, envp);
    free(envp);
    posix_spawn_file_actions_destroy(&fa);
    close(to[0]);
    close(from[1]);
    if (rc != 0) {
        fprintf(stderr, "posix_spawn: %s\n", strerror(rc));
        close(to[1]);
        close(from[0]);
        return -1;
    }
    c->to = to[1];
    c->from = from[0];
    return 0;
}

static inline int mt_write_line_(int fd, const char *fmt, va_list ap)
{
    char buf[512];
    int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
    if (n < 0 || n >= (int)sizeof buf - 1) {
        return -1;
    }
    buf[n++] = '\n';
    return write(fd, buf, (size_t)n) == n ? 0 : -1;
}

/* Reads one line (without the newline) into buf; -1 on EOF, error or timeout. Reads a
 * byte at a time so that nothing after the line is consumed. */
static inline int mt_read_line_(int fd, char *buf, size_t len)
{
    size_t k = 0;
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        int r = poll(&p, 1, MT_IPC_TIMEOUT_S * 1000);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            fprintf(stderr, "ipc_util: no line from the other process within %d s\n", MT_IPC_TIMEOUT_S);
            return -1;
        }
        char ch;
        ssize_t n = read(fd, &ch, 1);
        if (n <= 0) {
            return -1;
        }
        if (ch == '\n') {
            buf[k] = '\0';
            return 0;
        }
        if (k + 1 < len) {
            buf[k++] = ch;
        }
    }
}

static inline int mt_child_send(mt_child *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline int mt_child_send(mt_child *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = mt_write_line_(c->to, fmt, ap);
    va_end(ap);
    return rc;
}

static inline int mt_child_recv(mt_child *c, char *buf, size_t len)
{
    return mt_read_line_(c->from, buf, len);
}

/* Closes the pipes and waits for the child: its exit code, or 128 + signal. */
static inline int mt_child_wait(mt_child *c)
{
    close(c->to);
    close(c->from);
    int st = 0;
    while (waitpid(c->pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(st)) {
        return WEXITSTATUS(st);
    }
    return 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* Parent side: sends the formatted command line and reads the child's answer into out
 * ("-1" when the child is gone or the pipe broke). */
static inline void mt_child_ask(mt_child *c, char *out, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline void mt_child_ask(mt_child *c, char *out, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = mt_write_line_(c->to, fmt, ap);
    va_end(ap);
    if (rc != 0 || mt_child_recv(c, out, len) != 0) {
        snprintf(out, len, "-1");
    }
}

static inline int mt_parent_send(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline int mt_parent_send(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = mt_write_line_(MT_CHILD_OUT, fmt, ap);
    va_end(ap);
    return rc;
}

static inline int mt_parent_recv(char *buf, size_t len)
{
    return mt_read_line_(MT_CHILD_IN, buf, len);
}

/* Child side: waits for the line `expected` from the parent (-1 otherwise). */
static inline int mt_parent_expect(const char *expected)
{
    char buf[512];
    if (mt_parent_recv(buf, sizeof buf) != 0) {
        return -1;
    }
    if (strcmp(buf, expected) != 0) {
        fprintf(stderr, "ipc_util: expected '%s' from the parent, got '%s'\n", expected, buf);
        return -1;
    }
    return 0;
}

/* Parent side: waits for the line `expected` from the child (-1 otherwise). */
static inline int mt_child_expect(mt_child *c, const char *expected)
{
    char buf[512];
    if (mt_child_recv(c, buf, sizeof buf) != 0) {
        return -1;
    }
    if (strcmp(buf, expected) != 0) {
        fprintf(stderr, "ipc_util: expected '%s' from the child, got '%s'\n", expected, buf);
        return -1;
    }
    return 0;
}

#endif /* MOCK_IPC_UTIL_H */
