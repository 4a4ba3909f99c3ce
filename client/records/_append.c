/* client.records._append: the sync producer's per-record path in C (issue 28).
 *
 * A plain `for v in values: producer.send(topic, v)` loop spent ~3.2 us of the caller's CPU per
 * record in Python (the DeliveryFuture's __init__, three calls, the accumulator's lock, the
 * clock), and a callback added ~2.7 us more. These functions do the common case of each step
 * in one C call and return a "not here" answer for everything else, which the caller then
 * does in Python exactly as before:
 *
 * append_plain(ctx, topic, value, partition) -> DeliveryFuture | None
 *     ctx = (producer, producer._acc, producer._cluster, producer._sticky._current, proto,
 *            RECORD_OVERHEAD, acc.lock, acc.batches, producer._plain_topics,
 *            producer._max_record, acc.buffer_memory, acc.batch_size): the
 *     client.aio.Producer's objects and numbers fixed for its life given directly; what
 *     changes (_closed, _txn, the cluster's metadata, acc.buffered) read as attributes; the
 *     batch's fields through __slots__ offsets. (Not through vars(): an instance whose
 *     __dict__ is made reads its attributes ~2x slower in Python from then on.)
 *     client.aio.Producer._append_plain's common case: a bytes value appended to the sticky
 *     partition's open batch (`partition` None) or to `partition`'s, which it leaves not
 *     full. None (nothing done) when the producer
 *     is closed, the topic's cached view is missing or stale, no sticky partition is chosen
 *     yet, the buffer or the batch has no room, the record would fill the batch, or the
 *     accumulator's lock is held: the Python path then runs and does what it always did
 *     (raise, refresh, make a batch, move the sticky partition, wake the sender, wait). With a
 *     transaction manager its check_send() runs first (it raises outside a transaction).
 *     The future is a copy of `proto`'s slots (a DeliveryFuture never finished): no __init__.
 *
 * add_callback(future, fn, lock, running) -> bool
 *     DeliveryFuture.add_done_callback's common case: the first callback of a future still
 *     `running`, stored (the future stays out of the cyclic GC, see futures.py). False
 *     (nothing done) when it has a callback already, is finished, or `lock` is held.
 *
 * ack(futures, future_type, finished, tp, base_offset, append_time, entries, lock) -> list
 *     ack_delivery_futures's loop: each DeliveryFuture of the flat [index, future, ...] list
 *     of an acknowledged batch not yet finished gets its offset, timestamp, partition and the
 *     `finished` state. Returns the flat list [future, event, condition, callbacks, ...] of those
 *     that had callbacks, an Event or a Condition, as they were when it finished (for the
 *     caller to wake and call, in batch order),
 *     or None when `lock` is held or a future of another type is present (the caller then
 *     runs its Python loop). The caller holds no lock: the GIL is the lock, see below.
 *
 * Cost of "not here": records spread over many partitions often find no open batch (each
 * record starts one), so append_plain first looks for the batch without the two attribute
 * reads and before making anything (~0.3 us instead of ~0.95 us here when it answers None;
 * ~0.05 us more when it appends, as it looks again for real after the lock check).
 *
 * Atomicity. The accumulator's lock and futures.py's _LOCK guard state that the event-loop
 * thread changes too. These functions do not take them: each checks that the lock is free
 * (`lock.locked()`) and then makes its reads and writes without calling Python code, releasing
 * the GIL or allocating a GC-tracked object (the only allocations that can run a collection,
 * hence finalizers, hence a thread switch) between that check and its last write. While the
 * GIL is held that way, no other thread can hold the lock and be inside its critical section
 * halfway: a thread holding it would make locked() true. GC-tracked objects (the entry tuple,
 * the future, the result list) are made before the check.
 *
 * Thread: any, with the GIL held.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <string.h>
#include <time.h>

static PyObject *s_closed, *s_txn, *s_check_send, *s_metadata, *s_locked, *s_buffered;

/* Offsets of a class's __slots__, looked up once per class: reading a slot is then a load,
 * not an attribute lookup (this machine's ~60 ns each, a dozen per record). */
typedef struct {
    PyTypeObject *type; /* strong reference, or NULL */
    Py_ssize_t off[10];
} Slots;

static const char *const BATCH_SLOTS[] = {"entries", "futures", "size", "full", NULL};
enum { B_ENTRIES, B_FUTURES, B_SIZE, B_FULL };
static const char *const FUTURE_SLOTS[] = {"_state", "_done_callbacks", "_event", "_cond",
                                           "_tp", "_offset", "_timestamp", "_result",
                                           "_exception", NULL};
enum { F_STATE, F_CALLBACKS, F_EVENT, F_COND, F_TP, F_OFFSET, F_TIMESTAMP, F_RESULT,
       F_EXCEPTION };
static Slots batch_slots, future_slots;

/* 1 when s holds tp's offsets of `names` (all plain object slots of tp itself), 0 when tp
 * lacks one of them. */
static int
resolve(Slots *s, PyTypeObject *tp, const char *const *names)
{
    if (s->type == tp)
        return 1;
    Py_ssize_t off[10];
    for (int i = 0; names[i] != NULL; i++) {
        off[i] = -1;
        for (PyMemberDef *m = tp->tp_members; m != NULL && m->name != NULL; m++) {
            if (m->type == T_OBJECT_EX && !(m->flags & READONLY) && strcmp(m->name, names[i]) == 0) {
                off[i] = m->offset;
                break;
            }
        }
        if (off[i] < 0)
            return 0;
    }
    memcpy(s->off, off, sizeof(off));
    Py_INCREF(tp);
    Py_XSETREF(s->type, tp);
    return 1;
}

#define SLOT(obj, s, i) (*(PyObject **)((char *)(obj) + (s).off[i]))

/* Set a slot; the old value is dropped (the caller knows it is not the last reference to
 * anything with a finalizer: None, ints, strings). */
static inline void
set_slot(PyObject *obj, Py_ssize_t off, PyObject *v)
{
    PyObject **p = (PyObject **)((char *)obj + off);
    PyObject *old = *p;
    *p = v;
    Py_XDECREF(old);
}

/* 1 when `lock` (a threading.Lock) is held, 0 when free, -1 on error. */
static int
is_locked(PyObject *lock)
{
    PyObject *r = PyObject_CallMethodNoArgs(lock, s_locked);
    if (r == NULL)
        return -1;
    int held = PyObject_IsTrue(r);
    Py_DECREF(r);
    return held;
}

/* obj.name as a C long long: -2 (no exception) when not an int, -1 with an exception when
 * missing or on overflow. Values read here are >= 0. */
static long long
attr_ll(PyObject *obj, PyObject *name)
{
    PyObject *o = PyObject_GetAttr(obj, name);
    if (o == NULL)
        return -1;
    long long v = PyLong_CheckExact(o) ? PyLong_AsLongLong(o) : -2;
    Py_DECREF(o);
    return v;
}

/* A new instance of type(proto) (its tp_new: no __init__) with proto's __slots__ values,
 * out of the cyclic GC (proto's slots hold only strings, ints, None and empty tuples). */
static PyObject *
clone_slots(PyObject *proto, PyObject *empty)
{
    PyTypeObject *tp = Py_TYPE(proto);
    PyObject *obj = tp->tp_new(tp, empty, NULL);
    if (obj == NULL)
        return NULL;
    for (PyMemberDef *m = tp->tp_members; m != NULL && m->name != NULL; m++) {
        if (m->type != T_OBJECT_EX || (m->flags & READONLY))
            continue;
        PyObject *v = *(PyObject **)((char *)proto + m->offset);
        Py_XINCREF(v);
        *(PyObject **)((char *)obj + m->offset) = v;
    }
    if (PyObject_IS_GC(obj) && PyObject_GC_IsTracked(obj))
        PyObject_GC_UnTrack(obj);
    return obj;
}

typedef struct {
    PyObject *core, *acc, *cluster, *cur, *proto, *lock, *batches, *pt;
    long long overhead, max_record, buffer_memory, batch_size;
} Ctx;

/* The open batch of (topic, partition or the sticky one) that a record of `size` bytes
 * joins without filling it, in *batch (borrowed), and the accumulator's bytes buffered in
 * *buffered: 1; 0 when it is not that case; -1 on error. Runs no Python code and allocates
 * no GC-tracked object. `quick`: a hint only, without the two attribute reads (the
 * metadata snapshot's identity, the bytes buffered). */
static int
find_batch(const Ctx *c, PyObject *topic, PyObject *partition, long long size, int quick,
           PyObject **batch, long long *buffered)
{
    PyObject *md = NULL;
    if (!quick) {
        md = PyObject_GetAttr(c->cluster, s_metadata);
        if (md == NULL)
            return -1;
        Py_DECREF(md); /* (only compared, and the cluster client holds it) */
    }
    PyObject *st = PyDict_GetItemWithError(c->pt, topic);
    if (st == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (!PyTuple_CheckExact(st) || PyTuple_GET_SIZE(st) != 3
        || (!quick && PyTuple_GET_ITEM(st, 0) != md))
        return 0;
    PyObject *tps = PyTuple_GET_ITEM(st, 1);
    if (!PyList_CheckExact(tps) || size > c->max_record)
        return 0;
    PyObject *p_obj = partition;
    if (p_obj == Py_None) {
        p_obj = PyDict_GetItemWithError(c->cur, topic); /* the sticky partition */
        if (p_obj == NULL)
            return PyErr_Occurred() ? -1 : 0;
    }
    Py_ssize_t p = PyLong_AsSsize_t(p_obj);
    if (p == -1 && PyErr_Occurred()) {
        PyErr_Clear(); /* (an int past Py_ssize_t: the Python path says what is wrong) */
        return 0;
    }
    if (p < 0 || p >= PyList_GET_SIZE(tps))
        return 0;
    long long buf = 0;
    if (!quick) {
        buf = attr_ll(c->acc, s_buffered);
        if (buf < 0)
            return PyErr_Occurred() ? -1 : 0;
        if (buf + size > c->buffer_memory && buf > 0)
            return 0;
    }
    PyObject *dq = PyDict_GetItemWithError(c->batches, PyList_GET_ITEM(tps, p));
    if (dq == NULL)
        return PyErr_Occurred() ? -1 : 0;
    Py_ssize_t qlen = PySequence_Size(dq);
    if (qlen <= 0)
        return qlen < 0 ? -1 : 0;
    PyObject *b = PySequence_GetItem(dq, qlen - 1);
    if (b == NULL)
        return -1;
    Py_DECREF(b); /* (the deque keeps it) */
    if (!resolve(&batch_slots, Py_TYPE(b), BATCH_SLOTS))
        return 0;
    PyObject *full = SLOT(b, batch_slots, B_FULL);
    PyObject *bsize = SLOT(b, batch_slots, B_SIZE);
    PyObject *entries = SLOT(b, batch_slots, B_ENTRIES);
    PyObject *futures = SLOT(b, batch_slots, B_FUTURES);
    if (full != Py_False || bsize == NULL || !PyLong_CheckExact(bsize) || entries == NULL
        || !PyList_CheckExact(entries) || futures == NULL || !PyList_CheckExact(futures))
        return 0;
    long long bs = PyLong_AsLongLong(bsize);
    if (bs == -1 && PyErr_Occurred())
        return -1;
    if (bs + size >= c->batch_size)
        return 0; /* it would fill the batch: the Python path marks it and moves on */
    *batch = b;
    *buffered = buf;
    return 1;
}

/* append_plain's body: ctx is a 12-tuple (checked by the callers). */
static PyObject *
do_append_plain(PyObject *ctx, PyObject *topic, PyObject *value, PyObject *partition)
{
    Ctx c = {
        .core = PyTuple_GET_ITEM(ctx, 0),
        .acc = PyTuple_GET_ITEM(ctx, 1),
        .cluster = PyTuple_GET_ITEM(ctx, 2),
        .cur = PyTuple_GET_ITEM(ctx, 3),
        .proto = PyTuple_GET_ITEM(ctx, 4),
        .lock = PyTuple_GET_ITEM(ctx, 6),
        .batches = PyTuple_GET_ITEM(ctx, 7),
        .pt = PyTuple_GET_ITEM(ctx, 8),
        .overhead = PyLong_AsLongLong(PyTuple_GET_ITEM(ctx, 5)),
        .max_record = PyLong_AsLongLong(PyTuple_GET_ITEM(ctx, 9)),
        .buffer_memory = PyLong_AsLongLong(PyTuple_GET_ITEM(ctx, 10)),
        .batch_size = PyLong_AsLongLong(PyTuple_GET_ITEM(ctx, 11)),
    };
    if (PyErr_Occurred())
        return NULL;
    if (!PyDict_CheckExact(c.cur) || !PyDict_CheckExact(c.batches) || !PyDict_CheckExact(c.pt)) {
        PyErr_SetString(PyExc_TypeError, "append_plain: a context's mapping is not a dict");
        return NULL;
    }
    if (!PyBytes_CheckExact(value) || !PyUnicode_CheckExact(topic)
        || (partition != Py_None && !PyLong_CheckExact(partition)))
        Py_RETURN_NONE;
    long long size = c.overhead + PyBytes_GET_SIZE(value);
    PyObject *batch = NULL;
    long long buffered = 0;

    /* -- a first look, as a hint: records spread over many partitions often find no open
     * batch, and then nothing is made for nothing ------------------------------------------ */
    int found = find_batch(&c, topic, partition, size, 1, &batch, &buffered);
    if (found <= 0)
        return found < 0 ? NULL : Py_NewRef(Py_None);

    /* -- checks that may run Python code (the transaction manager's) ------------------------ */
    PyObject *o = PyObject_GetAttr(c.core, s_closed);
    if (o == NULL)
        return NULL;
    Py_DECREF(o); /* (the producer holds it) */
    if (o != Py_False)
        Py_RETURN_NONE; /* the Python path raises ClientClosedError */
    o = PyObject_GetAttr(c.core, s_txn);
    if (o == NULL)
        return NULL;
    if (o != Py_None) {
        PyObject *r = PyObject_CallMethodNoArgs(o, s_check_send);
        Py_DECREF(o);
        if (r == NULL)
            return NULL;
        Py_DECREF(r);
    }
    else {
        Py_DECREF(o);
    }

    /* -- GC-tracked allocations, before the lock check -------------------------------------- */
    PyObject *entry = NULL, *fut = NULL, *ts_obj = NULL, *idx = NULL, *nsize = NULL,
             *nbuf = NULL, *result = NULL, *empty = NULL;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    ts_obj = PyLong_FromLongLong((long long)now.tv_sec * 1000 + now.tv_nsec / 1000000);
    if (ts_obj == NULL)
        goto done;
    entry = PyTuple_Pack(4, Py_None, value, Py_None, ts_obj);
    if (entry == NULL)
        goto done;
    /* bytes, ints and None only: it cannot be part of a cycle, and the GC would untrack it at
     * its first young collection anyway (each record's entry then cost that collection a
     * visit) */
    PyObject_GC_UnTrack(entry);
    empty = PyTuple_New(0);
    if (empty == NULL)
        goto done;
    fut = clone_slots(c.proto, empty);
    if (fut == NULL)
        goto done;

    /* -- from here: no Python code, no GC-tracked allocation, until the last write ---------- */
    int held = is_locked(c.lock);
    if (held < 0)
        goto done;
    if (held)
        goto not_here;
    /* again, for real: the allocations may have run a collection, hence other threads */
    found = find_batch(&c, topic, partition, size, 0, &batch, &buffered);
    if (found < 0)
        goto done;
    if (found == 0)
        goto not_here;
    PyObject *entries = SLOT(batch, batch_slots, B_ENTRIES);
    PyObject *futures = SLOT(batch, batch_slots, B_FUTURES);
    long long bsize = PyLong_AsLongLong(SLOT(batch, batch_slots, B_SIZE));
    /* ints are not GC-tracked: making them runs no collection */
    idx = PyLong_FromSsize_t(PyList_GET_SIZE(entries));
    nsize = PyLong_FromLongLong(bsize + size);
    nbuf = PyLong_FromLongLong(buffered + size);
    if (idx == NULL || nsize == NULL || nbuf == NULL)
        goto done;
    /* the writes, as append_sticky's inlined branch makes them */
    if (PyList_Append(futures, idx) < 0 || PyList_Append(futures, fut) < 0
        || PyList_Append(entries, entry) < 0 || PyObject_SetAttr(c.acc, s_buffered, nbuf) < 0)
        goto done;
    set_slot(batch, batch_slots.off[B_SIZE], nsize);
    nsize = NULL;
    result = Py_NewRef(fut);
    goto done;

not_here:
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(entry);
    Py_XDECREF(fut);
    Py_XDECREF(empty);
    Py_XDECREF(ts_obj);
    Py_XDECREF(idx);
    Py_XDECREF(nsize);
    Py_XDECREF(nbuf);
    return result;
}

static PyObject *
append_plain(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 4 || !PyTuple_CheckExact(args[0]) || PyTuple_GET_SIZE(args[0]) != 12) {
        PyErr_SetString(PyExc_TypeError, "append_plain(ctx, topic, value, partition)");
        return NULL;
    }
    return do_append_plain(args[0], args[1], args[2], args[3]);
}

/* add_callback's body: 1 stored, 0 not that case, -1 on error. */
static int
try_add_callback(PyObject *fut, PyObject *fn, PyObject *lock, PyObject *running)
{
    if (!resolve(&future_slots, Py_TYPE(fut), FUTURE_SLOTS))
        return 0;
    int held = is_locked(lock);
    if (held < 0)
        return -1;
    if (held || SLOT(fut, future_slots, F_STATE) != running
        || SLOT(fut, future_slots, F_CALLBACKS) != Py_None)
        return 0;
    /* (a running future stays out of the cyclic GC with its callback: futures.py says why) */
    set_slot(fut, future_slots.off[F_CALLBACKS], Py_NewRef(fn));
    return 1;
}

static PyObject *
add_callback(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "add_callback(future, fn, lock, running)");
        return NULL;
    }
    int r = try_add_callback(args[0], args[1], args[2], args[3]);
    if (r < 0)
        return NULL;
    return PyBool_FromLong(r);
}

static PyObject *
ack(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError,
                        "ack(futures, future_type, finished, tp, base_offset, append_time, "
                        "entries, lock)");
        return NULL;
    }
    PyObject *futures = args[0], *ftype = args[1], *finished = args[2], *tp = args[3],
             *entries = args[6], *lock = args[7];
    long long base_offset = PyLong_AsLongLong(args[4]);
    if (base_offset == -1 && PyErr_Occurred())
        return NULL;
    long long append_time = PyLong_AsLongLong(args[5]);
    if (append_time == -1 && PyErr_Occurred())
        return NULL;
    if (!PyList_CheckExact(futures) || !PyList_CheckExact(entries)
        || PyList_GET_SIZE(futures) % 2 || !PyType_Check(ftype)
        || !resolve(&future_slots, (PyTypeObject *)ftype, FUTURE_SLOTS))
        Py_RETURN_NONE;
    PyObject *notify = PyList_New(0); /* before the lock check: it is GC-tracked */
    if (notify == NULL)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(futures);
    /* First pass, no writes: every future of the type, every index and timestamp usable. */
    for (Py_ssize_t i = 0; i < n; i += 2) {
        PyObject *ix = PyList_GET_ITEM(futures, i);
        PyObject *f = PyList_GET_ITEM(futures, i + 1);
        if ((PyObject *)Py_TYPE(f) != ftype || !PyLong_CheckExact(ix))
            goto not_here;
        Py_ssize_t k = PyLong_AsSsize_t(ix);
        if (k < 0 || k >= PyList_GET_SIZE(entries))
            goto not_here;
        if (append_time == -1) {
            PyObject *e = PyList_GET_ITEM(entries, k);
            if (!PyTuple_Check(e) || PyTuple_GET_SIZE(e) < 4
                || !PyLong_CheckExact(PyTuple_GET_ITEM(e, 3)))
                goto not_here;
        }
    }
    /* Ints are made below (not GC-tracked) and the notify list grows by PyList_Append (a
     * realloc of its item array): no collection. Setting a slot drops the old value, which
     * for a future not finished is None, an int or a str: no finalizer. */
    int held = is_locked(lock);
    if (held < 0)
        goto error;
    if (held)
        goto not_here;
    for (Py_ssize_t i = 0; i < n; i += 2) {
        Py_ssize_t k = PyLong_AsSsize_t(PyList_GET_ITEM(futures, i));
        PyObject *f = PyList_GET_ITEM(futures, i + 1);
        if (SLOT(f, future_slots, F_STATE) == finished)
            continue;
        long long ts = append_time;
        if (ts == -1) {
            ts = PyLong_AsLongLong(PyTuple_GET_ITEM(PyList_GET_ITEM(entries, k), 3));
            if (ts == -1 && PyErr_Occurred())
                goto error;
        }
        PyObject *off = PyLong_FromLongLong(base_offset >= 0 ? base_offset + k : -1);
        PyObject *tso = PyLong_FromLongLong(ts);
        if (off == NULL || tso == NULL) {
            Py_XDECREF(off);
            Py_XDECREF(tso);
            goto error;
        }
        set_slot(f, future_slots.off[F_TP], Py_NewRef(tp));
        set_slot(f, future_slots.off[F_OFFSET], off);
        set_slot(f, future_slots.off[F_TIMESTAMP], tso);
        set_slot(f, future_slots.off[F_STATE], Py_NewRef(finished));
        PyObject *cbs = SLOT(f, future_slots, F_CALLBACKS);
        PyObject *ev = SLOT(f, future_slots, F_EVENT);
        PyObject *cond = SLOT(f, future_slots, F_COND);
        if (cbs == NULL || ev == NULL || cond == NULL) {
            PyErr_SetString(PyExc_AttributeError, "ack: a DeliveryFuture slot is unset");
            goto error;
        }
        if (cbs != Py_None || ev != Py_None || cond != Py_None) {
            /* the callbacks move to the list before the slot lets go of them */
            if (PyList_Append(notify, f) < 0 || PyList_Append(notify, ev) < 0
                || PyList_Append(notify, cond) < 0 || PyList_Append(notify, cbs) < 0)
                goto error;
            set_slot(f, future_slots.off[F_CALLBACKS], Py_NewRef(Py_None));
        }
    }
    return notify;

error:
    Py_DECREF(notify);
    return NULL;
not_here:
    Py_DECREF(notify);
    Py_RETURN_NONE;
}

/* -- Methods as method descriptors ---------------------------------------------------------
 *
 * A Python method that only calls one of the functions above costs its own frame, the global
 * lookups of what it passes, and the call (~0.3 us a call here, most of what a callback added
 * to a send() loop). bind_future() and bind_send() return method descriptors of the functions
 * below made for the given class (PyDescr_NewMethod: what a C type's methods are), which the
 * Python class installs in place of its own: `f.add_done_callback(cb)` then runs C with no
 * frame and no bound-method object. Each does the common case and hands every other case to
 * the Python method it replaced (kept as the fallback), with the same arguments. */

static PyObject *g_lock, *g_running, *g_finished, *g_record_metadata, *g_callback_failed;
static PyObject *g_fb_add, *g_fb_exception, *g_fb_result, *g_fb_send;
static PyObject *s_notify, *s_plain_ctx, *s_plain, *s_timeout, *s_send_plain_slow;
static PyObject *s_kw[6]; /* send()'s parameter names after self */

/* fn(self, *args, **kwargs) from a vectorcall's arguments. */
static PyObject *
call_with_self(PyObject *fn, PyObject *self, PyObject *const *args, Py_ssize_t nargs,
               PyObject *kwnames)
{
    if (fn == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "client.records._append: method not bound");
        return NULL;
    }
    Py_ssize_t total = nargs + (kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0);
    PyObject *small[8];
    PyObject **buf = small;
    if (total + 1 > 8) {
        buf = PyMem_Malloc((size_t)(total + 1) * sizeof(PyObject *));
        if (buf == NULL)
            return PyErr_NoMemory();
    }
    buf[0] = self;
    if (total > 0)
        memcpy(buf + 1, args, (size_t)total * sizeof(PyObject *));
    PyObject *r = PyObject_Vectorcall(fn, buf, (size_t)nargs + 1, kwnames);
    if (buf != small)
        PyMem_Free(buf);
    return r;
}

/* DeliveryFuture.add_done_callback(fn) */
static PyObject *
fut_add_done_callback(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kwnames)
{
    if (nargs == 1 && kwnames == NULL && g_lock != NULL) {
        int r = try_add_callback(self, args[0], g_lock, g_running);
        if (r < 0)
            return NULL;
        if (r)
            Py_RETURN_NONE;
    }
    return call_with_self(g_fb_add, self, args, nargs, kwnames);
}

/* 1 when the arguments are those of (timeout=None): none, one positional, or `timeout=`. */
static int
timeout_only(Py_ssize_t nargs, PyObject *kwnames)
{
    if (kwnames == NULL)
        return nargs <= 1;
    return nargs == 0 && PyTuple_GET_SIZE(kwnames) == 1 && PyTuple_GET_ITEM(kwnames, 0) == s_timeout;
}

/* DeliveryFuture.exception(timeout=None): a finished future's exception, read. */
static PyObject *
fut_exception(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (g_finished != NULL && timeout_only(nargs, kwnames)
        && resolve(&future_slots, Py_TYPE(self), FUTURE_SLOTS)
        && SLOT(self, future_slots, F_STATE) == g_finished) {
        PyObject *exc = SLOT(self, future_slots, F_EXCEPTION);
        if (exc != NULL)
            return Py_NewRef(exc);
    }
    return call_with_self(g_fb_exception, self, args, nargs, kwnames);
}

/* DeliveryFuture.result(timeout=None): a finished future's result, made from its partition,
 * offset and timestamp when first asked for (as the Python method does). */
static PyObject *
fut_result(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (g_finished == NULL || !timeout_only(nargs, kwnames)
        || !resolve(&future_slots, Py_TYPE(self), FUTURE_SLOTS)
        || SLOT(self, future_slots, F_STATE) != g_finished
        || SLOT(self, future_slots, F_EXCEPTION) != Py_None)
        goto fallback;
    PyObject *res = SLOT(self, future_slots, F_RESULT);
    PyObject *tp = SLOT(self, future_slots, F_TP);
    if (res == NULL || tp == NULL)
        goto fallback;
    if (res != Py_None || tp == Py_None)
        return Py_NewRef(res);
    PyObject *offset = SLOT(self, future_slots, F_OFFSET);
    PyObject *timestamp = SLOT(self, future_slots, F_TIMESTAMP);
    if (!PyTuple_Check(tp) || PyTuple_GET_SIZE(tp) != 2 || offset == NULL || timestamp == NULL)
        goto fallback;
    PyObject *md_args[4] = {PyTuple_GET_ITEM(tp, 0), PyTuple_GET_ITEM(tp, 1), offset, timestamp};
    res = PyObject_Vectorcall(g_record_metadata, md_args, 4, NULL);
    if (res == NULL)
        return NULL;
    /* (a finished future's _result is None here: dropping it runs nothing) */
    set_slot(self, future_slots.off[F_RESULT], Py_NewRef(res));
    return res;
fallback:
    return call_with_self(g_fb_result, self, args, nargs, kwnames);
}

/* notify_all(notify): futures.py's _notify_all. `notify` is the flat [future, its Event, its
 * Condition, its callbacks, ...] list of finished futures; each one's waiters are woken
 * (future._notify(event, condition, None)) and its callbacks called with it, in order. A
 * callback's Exception goes to callback_failed(future, exception) (which logs it) and the
 * next one runs; anything else (a BaseException) propagates, as in Python. */
static int
call_callback(PyObject *fn, PyObject *fut)
{
    PyObject *r = PyObject_CallOneArg(fn, fut);
    if (r != NULL) {
        Py_DECREF(r);
        return 0;
    }
    if (!PyErr_ExceptionMatches(PyExc_Exception) || g_callback_failed == NULL)
        return -1;
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc = PyErr_GetRaisedException();
#else
    PyObject *type, *exc, *tb;
    PyErr_Fetch(&type, &exc, &tb);
    PyErr_NormalizeException(&type, &exc, &tb);
    if (tb != NULL && exc != NULL)
        PyException_SetTraceback(exc, tb);
    Py_XDECREF(type);
    Py_XDECREF(tb);
#endif
    r = PyObject_CallFunctionObjArgs(g_callback_failed, fut, exc != NULL ? exc : Py_None, NULL);
    Py_XDECREF(exc);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

static PyObject *
notify_all(PyObject *self, PyObject *notify)
{
    (void)self;
    if (!PyList_CheckExact(notify) || PyList_GET_SIZE(notify) % 4) {
        PyErr_SetString(PyExc_TypeError, "notify_all(notify): a list of 4-item groups");
        return NULL;
    }
    Py_INCREF(notify); /* (a callback may do anything; the list stays ours) */
    for (Py_ssize_t i = 0; i + 3 < PyList_GET_SIZE(notify); i += 4) {
        PyObject *fut = PyList_GET_ITEM(notify, i), *ev = PyList_GET_ITEM(notify, i + 1),
                 *cond = PyList_GET_ITEM(notify, i + 2), *cbs = PyList_GET_ITEM(notify, i + 3);
        Py_INCREF(fut);
        Py_INCREF(cbs);
        int err = 0;
        if (ev != Py_None || cond != Py_None) {
            PyObject *r = PyObject_CallMethodObjArgs(fut, s_notify, ev, cond, Py_None, NULL);
            if (r == NULL)
                err = 1;
            Py_XDECREF(r);
        }
        if (!err && PyList_CheckExact(cbs)) {
            for (Py_ssize_t k = 0; !err && k < PyList_GET_SIZE(cbs); k++) {
                PyObject *fn = Py_NewRef(PyList_GET_ITEM(cbs, k));
                err = call_callback(fn, fut) < 0;
                Py_DECREF(fn);
            }
        }
        else if (!err && cbs != Py_None) {
            err = call_callback(cbs, fut) < 0;
        }
        Py_DECREF(fut);
        Py_DECREF(cbs);
        if (err) {
            Py_DECREF(notify);
            return NULL;
        }
    }
    Py_DECREF(notify);
    Py_RETURN_NONE;
}

/* The sync Producer.send(topic, value=None, key=None, partition=None, headers=None,
 * timestamp_ms=None): a bytes value with no key, headers or timestamp goes to
 * do_append_plain, then (not that case) to self._send_plain_slow(topic, value, partition);
 * every other call to the Python method. */
static PyObject *
producer_send(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *a[6] = {NULL, Py_None, Py_None, Py_None, Py_None, Py_None};
    if (nargs < 1 || nargs > 6 || g_fb_send == NULL)
        goto general;
    for (Py_ssize_t i = 0; i < nargs; i++)
        a[i] = args[i];
    if (kwnames != NULL) {
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(kwnames); k++) {
            PyObject *name = PyTuple_GET_ITEM(kwnames, k);
            int j = 0;
            while (j < 6 && s_kw[j] != name) /* (keyword names are interned) */
                j++;
            if (j == 6 || j < nargs)
                goto general; /* (unusual, or an error the Python method words) */
            a[j] = args[nargs + k];
        }
    }
    if (a[0] == NULL || !PyBytes_CheckExact(a[1]) || a[2] != Py_None || a[4] != Py_None
        || a[5] != Py_None)
        goto general;
    PyObject *ctx = PyObject_GetAttr(self, s_plain_ctx);
    if (ctx == NULL)
        return NULL;
    if (!PyTuple_CheckExact(ctx) || PyTuple_GET_SIZE(ctx) != 12) {
        Py_DECREF(ctx);
        goto general;
    }
    PyObject *plain = PyObject_GetAttr(PyTuple_GET_ITEM(ctx, 0), s_plain);
    if (plain == NULL) {
        Py_DECREF(ctx);
        return NULL;
    }
    Py_DECREF(plain); /* (compared only; the producer holds it) */
    PyObject *r = plain == Py_True ? do_append_plain(ctx, a[0], a[1], a[3]) : NULL;
    Py_DECREF(ctx);
    if (plain != Py_True)
        goto general;
    if (r != Py_None)
        return r; /* the future, or NULL with the error */
    Py_DECREF(r);
    /* (looked up: a subclass may override it) */
    return PyObject_CallMethodObjArgs(self, s_send_plain_slow, a[0], a[1], a[3], NULL);
general:
    return call_with_self(g_fb_send, self, args, nargs, kwnames);
}

static PyMethodDef fut_add_done_callback_def = {
    "add_done_callback", (PyCFunction)(void (*)(void))fut_add_done_callback,
    METH_FASTCALL | METH_KEYWORDS,
    "add_done_callback($self, fn, /)\n--\n\n"
    "Call fn(future) once the record is acknowledged or failed (at once if it is)."};
static PyMethodDef fut_exception_def = {
    "exception", (PyCFunction)(void (*)(void))fut_exception, METH_FASTCALL | METH_KEYWORDS,
    "exception($self, /, timeout=None)\n--\n\n"
    "The delivery's exception, or None; waits up to timeout seconds."};
static PyMethodDef fut_result_def = {
    "result", (PyCFunction)(void (*)(void))fut_result, METH_FASTCALL | METH_KEYWORDS,
    "result($self, /, timeout=None)\n--\n\n"
    "The record's RecordMetadata; raises the delivery's exception; waits up to timeout "
    "seconds."};
static PyMethodDef producer_send_def = {
    "send", (PyCFunction)(void (*)(void))producer_send, METH_FASTCALL | METH_KEYWORDS,
    "send($self, /, topic, value=None, key=None, partition=None, headers=None, "
    "timestamp_ms=None)\n--\n\n"
    "Queue one record; a concurrent.futures.Future of its RecordMetadata."};

/* bind_future(future_type, lock, running, finished, record_metadata, callback_failed,
 *             add_done_callback, exception, result) -> (add_done_callback, exception, result)
 * The last three arguments are the Python methods (the fallbacks); returns the descriptors. */
static PyObject *
bind_future(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 9 || !PyType_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError,
                        "bind_future(future_type, lock, running, finished, record_metadata, "
                        "callback_failed, add_done_callback, exception, result)");
        return NULL;
    }
    PyTypeObject *tp = (PyTypeObject *)args[0];
    if (!resolve(&future_slots, tp, FUTURE_SLOTS)) {
        PyErr_SetString(PyExc_TypeError, "bind_future: the type lacks a DeliveryFuture slot");
        return NULL;
    }
    PyObject *add = PyDescr_NewMethod(tp, &fut_add_done_callback_def);
    PyObject *exc = PyDescr_NewMethod(tp, &fut_exception_def);
    PyObject *res = PyDescr_NewMethod(tp, &fut_result_def);
    if (add == NULL || exc == NULL || res == NULL) {
        Py_XDECREF(add);
        Py_XDECREF(exc);
        Py_XDECREF(res);
        return NULL;
    }
    Py_XSETREF(g_lock, Py_NewRef(args[1]));
    Py_XSETREF(g_running, Py_NewRef(args[2]));
    Py_XSETREF(g_finished, Py_NewRef(args[3]));
    Py_XSETREF(g_record_metadata, Py_NewRef(args[4]));
    Py_XSETREF(g_callback_failed, Py_NewRef(args[5]));
    Py_XSETREF(g_fb_add, Py_NewRef(args[6]));
    Py_XSETREF(g_fb_exception, Py_NewRef(args[7]));
    Py_XSETREF(g_fb_result, Py_NewRef(args[8]));
    PyObject *out = PyTuple_Pack(3, add, exc, res);
    Py_DECREF(add);
    Py_DECREF(exc);
    Py_DECREF(res);
    return out;
}

/* bind_send(producer_type, send) -> the send descriptor; `send` is the fallback. */
static PyObject *
bind_send(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2 || !PyType_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "bind_send(producer_type, send)");
        return NULL;
    }
    PyObject *d = PyDescr_NewMethod((PyTypeObject *)args[0], &producer_send_def);
    if (d == NULL)
        return NULL;
    Py_XSETREF(g_fb_send, Py_NewRef(args[1]));
    return d;
}

static PyMethodDef methods[] = {
    {"append_plain", (PyCFunction)(void (*)(void))append_plain, METH_FASTCALL,
     "append_plain(ctx, topic, value, partition) -> future | None\n\n"
     "The sync producer's per-record append of a bytes value to the sticky (partition None) "
     "or given partition's open batch; None when it is not that common case (nothing done)."},
    {"add_callback", (PyCFunction)(void (*)(void))add_callback, METH_FASTCALL,
     "add_callback(future, fn, lock, running) -> bool\n\n"
     "Store the first callback of a running DeliveryFuture; False when not that case."},
    {"ack", (PyCFunction)(void (*)(void))ack, METH_FASTCALL,
     "ack(futures, future_type, finished, tp, base_offset, append_time, entries, lock) -> "
     "list | None\n\n"
     "Finish an acknowledged batch's DeliveryFutures; [future, event, condition, callbacks, "
     "...] of those to "
     "notify, or None when not that case (nothing done)."},
    {"notify_all", (PyCFunction)notify_all, METH_O,
     "notify_all(notify)\n\n"
     "Wake the waiters and call the callbacks of finished futures: notify is "
     "[future, event, condition, callbacks, ...] as ack() returns it."},
    {"bind_future", (PyCFunction)(void (*)(void))bind_future, METH_FASTCALL,
     "bind_future(future_type, lock, running, finished, record_metadata, callback_failed, "
     "add_done_callback, exception, result) -> (add_done_callback, exception, result)\n\n"
     "Method descriptors of the C fast paths for future_type; the Python methods given are "
     "the fallbacks."},
    {"bind_send", (PyCFunction)(void (*)(void))bind_send, METH_FASTCALL,
     "bind_send(producer_type, send) -> descriptor\n\n"
     "The sync Producer.send as a method descriptor; send is the fallback."},
    {NULL, NULL, 0, NULL},
};

static int
exec_module(PyObject *m)
{
    (void)m;
#define INTERN(var, text)                                                                       \
    if ((var = PyUnicode_InternFromString(text)) == NULL)                                       \
        return -1;
    INTERN(s_closed, "_closed");
    INTERN(s_txn, "_txn");
    INTERN(s_check_send, "check_send");
    INTERN(s_metadata, "metadata");
    INTERN(s_locked, "locked");
    INTERN(s_buffered, "buffered");
    INTERN(s_notify, "_notify");
    INTERN(s_plain_ctx, "_plain_ctx");
    INTERN(s_plain, "_plain");
    INTERN(s_timeout, "timeout");
    INTERN(s_send_plain_slow, "_send_plain_slow");
    INTERN(s_kw[0], "topic");
    INTERN(s_kw[1], "value");
    INTERN(s_kw[2], "key");
    INTERN(s_kw[3], "partition");
    INTERN(s_kw[4], "headers");
    INTERN(s_kw[5], "timestamp_ms");
#undef INTERN
    return 0;
}

static struct PyModuleDef_Slot slots[] = {
    {Py_mod_exec, exec_module},
    {0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "client.records._append",
    .m_doc = "Optional C fast path of the sync producer's per-record send() (client/sync.py).",
    .m_size = 0,
    .m_methods = methods,
    .m_slots = slots,
};

PyMODINIT_FUNC
PyInit__append(void)
{
    return PyModuleDef_Init(&module);
}
