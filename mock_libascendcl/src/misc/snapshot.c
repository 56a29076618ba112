/*
 * snapshot.c - process snapshots: aclrtSnapShotProcessLock / Backup / Restore / Unlock
 * and the stage callbacks (acl_next_semantics.md section 5.4, D-SNAP).
 *
 * One state machine per process:
 *   RUNNING --Lock--> LOCKED --Backup--> BACKED_UP --Restore--> LOCKED
 *   LOCKED or BACKED_UP --Unlock--> RUNNING;  BACKED_UP --Backup--> BACKED_UP (the last
 *   backup counts)
 * A call in another state fails: Lock with ACL_ERROR_SNAPSHOT_LOCK_FAILED (507906, the
 * reference's guess), Unlock with ..._UNLOCK_FAILED (507907), Backup with
 * ..._BACKUP_FAILED (507908), Restore with ..._RESTORE_FAILED (507909); a call made while
 * another snapshot call of the process is still running counts as "another state".
 *   - pid must be the caller's own (getpid(); ACL_ERROR_INVALID_PARAM otherwise), and the
 *     reserve / args pointers NULL (100000);
 *   - Lock runs the LOCK_PRE callbacks, then closes the resource gate (core/gate.c):
 *     until Unlock, every call that changes device resources blocks its calling thread;
 *     queries and synchronizations do not. A failing callback (nonzero) makes the lock
 *     fail with ACL_ERROR_SNAPSHOT_CALLBACK_FAILED (507912) and the state stays RUNNING;
 *   - Backup runs BACKUP_PRE, synchronizes every context, saves the content of every
 *     device allocation and mapped VMM range (host memory image), runs BACKUP_POST;
 *   - Restore runs RESTORE_PRE, checks that the process uses the same devices as at the
 *     backup (RESTORE_FAILED otherwise), writes the saved content back into the
 *     allocations (still the same ones: frees are held by the gate), runs RESTORE_POST,
 *     and drops the backup;
 *   - Unlock opens the gate, drops any backup and runs UNLOCK_POST.
 * Callbacks: aclrtSnapShotCallbackRegister(stage, cb, args) (stage 0..5; the same cb
 * twice for a stage is ACL_ERROR_SNAPSHOT_REGISTER_CALLBACK_FAILED 507913), Unregister
 * (an unknown cb is 100000). At each stage every callback runs once per device in use (a
 * device with a live context), with that device id, without any lock held; callbacks of
 * a stage run in registration order, device by device. A nonzero return fails the call
 * (507912); for BACKUP_POST, RESTORE_POST and UNLOCK_POST the transition has happened.
 * aclFinalize unlocks by force (the gate opens, the backup and the callbacks go).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "mem/mem.h"
#include "misc/misc.h"
#include "misc/misc_private.h"

#define SNAP_STAGES 6

typedef enum snap_state { SNAP_RUNNING, SNAP_LOCKED, SNAP_BACKED_UP, SNAP_BUSY } snap_state;

typedef struct snap_cb {
    aclrtSnapShotCallBack fn;
    void *args;
} snap_cb;

static mock_mutex g_snap_mu = MOCK_MUTEX_INIT(MOCK_LOCK_SNAPSHOT);
static snap_state g_state = SNAP_RUNNING;
static mem_image *g_image;       /* the last backup */
static uint64_t g_image_devices; /* devices in use at that backup */
static snap_cb *g_cbs[SNAP_STAGES];
static size_t g_ncbs[SNAP_STAGES], g_capcbs[SNAP_STAGES];

static const char *const k_state_names[] = {"RUNNING", "LOCKED", "BACKED_UP", "busy with another snapshot call"};
static const char *const k_stage_names[] = {"LOCK_PRE",     "BACKUP_PRE",   "BACKUP_POST",
                                            "RESTORE_PRE", "RESTORE_POST", "UNLOCK_POST"};

static aclError check_pid(const char *fn, int pid, const void *reserved, const char *reserved_name)
{
    if (pid != (int)getpid()) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'pid' %d is not the calling process (%d): snapshots are per process", pid,
                          (int)getpid());
    }
    if (reserved != NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' must be NULL", reserved_name);
    }
    return ACL_SUCCESS;
}

/* Moves from one of the states in `from_mask` (bit per snap_state) to BUSY; false (with
 * *was the state) when the machine is in another one. */
static bool begin(unsigned from_mask, snap_state *was)
{
    core_mutex_lock(&g_snap_mu);
    *was = g_state;
    bool ok = (from_mask & (1u << g_state)) != 0;
    if (ok) {
        g_state = SNAP_BUSY;
    }
    core_mutex_unlock(&g_snap_mu);
    return ok;
}

static void finish(snap_state to)
{
    core_mutex_lock(&g_snap_mu);
    g_state = to;
    core_mutex_unlock(&g_snap_mu);
}

/* Runs the callbacks of `stage` for every device in use; 0 or the first failure
 * (recorded under fn). */
static aclError run_callbacks(const char *fn, aclrtSnapShotStage stage)
{
    core_mutex_lock(&g_snap_mu);
    size_t n = g_ncbs[stage];
    snap_cb *copy = n > 0 ? malloc(n * sizeof(*copy)) : NULL;
    if (copy != NULL) {
        memcpy(copy, g_cbs[stage], n * sizeof(*copy));
    }
    core_mutex_unlock(&g_snap_mu);
    if (n > 0 && copy == NULL) {
        return core_error(fn, ACL_ERROR_SNAPSHOT_CALLBACK_FAILED, "host out of memory for the %s callbacks",
                          k_stage_names[stage]);
    }
    uint64_t devices = core_devices_in_use();
    aclError rc = ACL_SUCCESS;
    for (size_t i = 0; i < n && rc == ACL_SUCCESS; i++) {
        for (int32_t dev = 0; dev < 64 && rc == ACL_SUCCESS; dev++) {
            if ((devices >> dev & 1u) == 0) {
                continue;
            }
            core_lock_check_none("a snapshot callback");
            uint32_t r = copy[i].fn(dev, copy[i].args);
            if (r != 0) {
                rc = core_error(fn, ACL_ERROR_SNAPSHOT_CALLBACK_FAILED, "the %s callback %zu returned %u for device %d",
                                k_stage_names[stage], i, r, dev);
            }
        }
    }
    free(copy);
    return rc;
}

static aclError wrong_state(const char *fn, aclError code, snap_state was)
{
    return core_error(fn, code, "the process snapshot state is %s", k_state_names[was]);
}

aclError aclrtSnapShotProcessLock(int pid, void *reserve)
{
    const char *fn = "aclrtSnapShotProcessLock";
    aclError rc = check_pid(fn, pid, reserve, "reserve");
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    snap_state was;
    if (!begin(1u << SNAP_RUNNING, &was)) {
        return wrong_state(fn, ACL_ERROR_SNAPSHOT_LOCK_FAILED, was);
    }
    rc = run_callbacks(fn, ACL_RT_SNAPSHOT_LOCK_PRE);
    if (rc != ACL_SUCCESS) {
        finish(SNAP_RUNNING); /* a failed lock falls back to RUNNING */
        return rc;
    }
    core_gate_close();
    finish(SNAP_LOCKED);
    return ACL_SUCCESS;
}

aclError aclrtSnapShotProcessBackup(int pid, aclrtSnapShotBackupArgs *args)
{
    const char *fn = "aclrtSnapShotProcessBackup";
    aclError rc = check_pid(fn, pid, args, "args");
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    if (core_worker_stream() != NULL) {
        /* the backup synchronizes every stream, this one too: it would wait for itself */
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "called from a task of a stream: the backup would wait for that task");
    }
    snap_state was;
    if (!begin((1u << SNAP_LOCKED) | (1u << SNAP_BACKED_UP), &was)) {
        return wrong_state(fn, ACL_ERROR_SNAPSHOT_BACKUP_FAILED, was);
    }
    rc = run_callbacks(fn, ACL_RT_SNAPSHOT_BACKUP_PRE);
    if (rc != ACL_SUCCESS) {
        finish(was);
        return rc;
    }
    aclError sync = core_synchronize_all(-1);
    if (sync != ACL_SUCCESS) {
        finish(was);
        return core_error(fn, ACL_ERROR_SNAPSHOT_BACKUP_FAILED,
                          "synchronizing the contexts before the backup failed with %d", (int)sync);
    }
    mem_image *img = mem_image_save();
    if (img == NULL) {
        finish(was);
        return core_error(fn, ACL_ERROR_SNAPSHOT_BACKUP_FAILED, "host out of memory for the device memory image");
    }
    core_mutex_lock(&g_snap_mu);
    mem_image *old = g_image;
    g_image = img;
    g_image_devices = core_devices_in_use();
    core_mutex_unlock(&g_snap_mu);
    mem_image_free(old);
    rc = run_callbacks(fn, ACL_RT_SNAPSHOT_BACKUP_POST);
    finish(SNAP_BACKED_UP);
    return rc;
}

aclError aclrtSnapShotProcessRestore(int pid, aclrtSnapShotRestoreArgs *args)
{
    const char *fn = "aclrtSnapShotProcessRestore";
    aclError rc = check_pid(fn, pid, args, "args");
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    snap_state was;
    if (!begin(1u << SNAP_BACKED_UP, &was)) {
        return wrong_state(fn, ACL_ERROR_SNAPSHOT_RESTORE_FAILED, was);
    }
    rc = run_callbacks(fn, ACL_RT_SNAPSHOT_RESTORE_PRE);
    if (rc != ACL_SUCCESS) {
        finish(SNAP_BACKED_UP);
        return rc;
    }
    core_mutex_lock(&g_snap_mu);
    mem_image *img = g_image;
    uint64_t devices = g_image_devices;
    core_mutex_unlock(&g_snap_mu);
    uint64_t now = core_devices_in_use();
    if (now != devices) {
        finish(SNAP_BACKED_UP);
        return core_error(fn, ACL_ERROR_SNAPSHOT_RESTORE_FAILED,
                          "the process uses other devices (mask 0x%llx) than at the backup (0x%llx)",
                          (unsigned long long)now, (unsigned long long)devices);
    }
    mem_image_restore(img);
    core_mutex_lock(&g_snap_mu);
    g_image = NULL;
    core_mutex_unlock(&g_snap_mu);
    mem_image_free(img);
    rc = run_callbacks(fn, ACL_RT_SNAPSHOT_RESTORE_POST);
    finish(SNAP_LOCKED);
    return rc;
}

aclError aclrtSnapShotProcessUnlock(int pid, void *reserve)
{
    const char *fn = "aclrtSnapShotProcessUnlock";
    aclError rc = check_pid(fn, pid, reserve, "reserve");
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    snap_state was;
    if (!begin((1u << SNAP_LOCKED) | (1u << SNAP_BACKED_UP), &was)) {
        return wrong_state(fn, ACL_ERROR_SNAPSHOT_UNLOCK_FAILED, was);
    }
    core_mutex_lock(&g_snap_mu);
    mem_image *img = g_image;
    g_image = NULL;
    core_mutex_unlock(&g_snap_mu);
    mem_image_free(img);
    core_gate_open();
    finish(SNAP_RUNNING);
    return run_callbacks(fn, ACL_RT_SNAPSHOT_UNLOCK_POST);
}

static aclError check_stage(const char *fn, aclrtSnapShotStage stage, aclrtSnapShotCallBack callback)
{
    if ((int)stage < 0 || (int)stage >= SNAP_STAGES) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'stage' %d is not an aclrtSnapShotStage (0..5)",
                          (int)stage);
    }
    if (callback == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'callback' is NULL");
    }
    return ACL_SUCCESS;
}

aclError aclrtSnapShotCallbackRegister(aclrtSnapShotStage stage, aclrtSnapShotCallBack callback, void *args)
{
    const char *fn = "aclrtSnapShotCallbackRegister";
    aclError rc = check_stage(fn, stage, callback);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    int why = 0; /* 1 duplicate, 2 memory */
    core_mutex_lock(&g_snap_mu);
    for (size_t i = 0; i < g_ncbs[stage]; i++) {
        if (g_cbs[stage][i].fn == callback) {
            why = 1;
        }
    }
    if (why == 0 && g_ncbs[stage] == g_capcbs[stage]) {
        size_t ncap = g_capcbs[stage] ? g_capcbs[stage] * 2 : 4;
        snap_cb *v = realloc(g_cbs[stage], ncap * sizeof(*v));
        if (v == NULL) {
            why = 2;
        } else {
            g_cbs[stage] = v;
            g_capcbs[stage] = ncap;
        }
    }
    if (why == 0) {
        g_cbs[stage][g_ncbs[stage]++] = (snap_cb){callback, args};
    }
    core_mutex_unlock(&g_snap_mu);
    if (why == 1) {
        return core_error(fn, ACL_ERROR_SNAPSHOT_REGISTER_CALLBACK_FAILED,
                          "the callback is already registered for stage %s", k_stage_names[stage]);
    }
    if (why == 2) {
        return core_error(fn, ACL_ERROR_SNAPSHOT_REGISTER_CALLBACK_FAILED, "host out of memory");
    }
    return ACL_SUCCESS;
}

aclError aclrtSnapShotCallbackUnregister(aclrtSnapShotStage stage, aclrtSnapShotCallBack callback)
{
    const char *fn = "aclrtSnapShotCallbackUnregister";
    aclError rc = check_stage(fn, stage, callback);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    bool found = false;
    core_mutex_lock(&g_snap_mu);
    for (size_t i = 0; i < g_ncbs[stage] && !found; i++) {
        if (g_cbs[stage][i].fn == callback) {
            memmove(&g_cbs[stage][i], &g_cbs[stage][i + 1], (g_ncbs[stage] - i - 1) * sizeof(snap_cb));
            g_ncbs[stage]--;
            found = true;
        }
    }
    core_mutex_unlock(&g_snap_mu);
    if (!found) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "the callback is not registered for stage %s",
                          k_stage_names[stage]);
    }
    return ACL_SUCCESS;
}

void misc_snapshot_release(void)
{
    core_mutex_lock(&g_snap_mu);
    bool was_locked = g_state != SNAP_RUNNING;
    g_state = SNAP_RUNNING;
    mem_image *img = g_image;
    g_image = NULL;
    for (int s = 0; s < SNAP_STAGES; s++) {
        free(g_cbs[s]);
        g_cbs[s] = NULL;
        g_ncbs[s] = g_capcbs[s] = 0;
    }
    core_mutex_unlock(&g_snap_mu);
    mem_image_free(img);
    if (was_locked) {
        core_gate_open();
    }
}
