/* The per-term table of a segment (term_table.py has the layout): a column of it read in place,
 * whether formats 4-6's array or format 7's packed blocks (TCol, tat: the Postings' pointers), and
 * format 7's packer (pack_term_table, term_table.pack's kernel, byte for byte its numpy code's).
 * Part of the unity build _kernels.c (after packed.c). */

#define TABLE_ROWS 64 /* rows of the per-term table in a packed block: term_table.ROWS */

/* A column of the per-term table (term_table.py): a column of formats 4-6's array (`a`, read with
 * at()), or format 7's packed blocks (`packed`): `dir` uint32 rows of each column's smallest value
 * in the block and where the block starts in `bits`, which holds the block's column widths, then
 * its columns' offsets from those values, bit-packed; this is column `col` of `cols`.  n: rows. */
typedef struct {
    Arr a, dir, bits;
    int packed, col, cols;
    Py_ssize_t n;
} TCol;

/* Row i of a column (i < n: tcol_get checked every block it can reach). */
static inline uint64_t tat(const TCol *c, Py_ssize_t i) {
    if (!c->packed) return at(&c->a, i);
    const uint32_t *d = (const uint32_t *)c->dir.p + (i / TABLE_ROWS) * (c->cols + 1);
    const unsigned char *w = c->bits.p + d[c->cols];
    uint64_t before = 0;
    for (int k = 0; k < c->col; k++) before += w[k];
    int b = w[c->col];
    return d[c->col] + bits_at(w + c->cols + 8 * before, (uint64_t)(i % TABLE_ROWS) * (uint64_t)b, b);
}

static void tcol_release(TCol *c) {
    arr_release(&c->a);
    arr_release(&c->dir);
    arr_release(&c->bits);
}

/* Whether the packed blocks [b0, b1) of a column are inside its file: each width at most 32, and
 * the block's bits and the 8 bytes a read at its last value may touch before the file's end. */
static int tcol_check(const TCol *c, Py_ssize_t b0, Py_ssize_t b1) {
    const uint32_t *dir = (const uint32_t *)c->dir.p;
    for (Py_ssize_t k = b0; k < b1; k++) {
        uint64_t start = dir[k * (c->cols + 1) + c->cols], size = (uint64_t)c->cols;
        if (start + size > (uint64_t)c->bits.n) return corrupt("a packed term table block beyond its file");
        for (int j = 0; j < c->cols; j++) {
            int w = c->bits.p[start + j];
            if (w > 32) return corrupt("a packed term table width over 32 bits");
            size += 8 * (uint64_t)w;
        }
        if (start + size + 8 > (uint64_t)c->bits.n) return corrupt("a packed term table block beyond its file");
    }
    return 0;
}

/* Whether rows i and j of a column are in blocks inside its file (tcol_check), for tat() to read:
 * the Postings check a term's rows when it is first asked for (term_ok), not every block when a
 * segment opens, which would read (and keep resident) all of a large table. */
static int tcol_rows_ok(const TCol *c, Py_ssize_t i, Py_ssize_t j) {
    if (!c->packed) return 0;
    Py_ssize_t a = i / TABLE_ROWS, b = j / TABLE_ROWS;
    return tcol_check(c, a, a + 1) < 0 || (b != a && tcol_check(c, b, b + 1) < 0) ? -1 : 0;
}

/* Whether two packed columns are columns of one table (the same directory and bits): the blocks
 * tcol_check passes for one it passes for the other. */
static int tcol_same_table(const TCol *a, const TCol *b) {
    return a->packed && b->packed && a->dir.p == b->dir.p && a->dir.n == b->dir.n && a->bits.p == b->bits.p &&
           a->bits.n == b->bits.n && a->cols == b->cols;
}

/* A column from an array (a column of a table) or a packed column's (dir, bits, col, rows)
 * (term_table.kernel_column), its shape checked, not its blocks: tcol_check or tcol_rows_ok
 * before tat() reads a row. */
static int tcol_get(PyObject *obj, TCol *c, const char *what) {
    memset(c, 0, sizeof(*c));
    if (!PyTuple_Check(obj)) {
        if (arr_get_strided(obj, &c->a, what) < 0) return -1;
        c->n = c->a.n;
        return 0;
    }
    PyObject *d, *b;
    int col;
    Py_ssize_t rows;
    if (!PyArg_ParseTuple(obj, "OOin", &d, &b, &col, &rows)) return -1;
    c->packed = 1;
    if (arr_get_nd(d, &c->dir, what, 1) < 0 || arr_get(b, &c->bits, what) < 0) {
        tcol_release(c);
        return -1;
    }
    Py_ssize_t n_blocks = rows >= 0 ? rows / TABLE_ROWS + (rows % TABLE_ROWS != 0) : -1;
    if (c->dir.view.ndim != 2 || c->dir.size != 4 || c->bits.size != 1 || c->dir.view.shape[0] != n_blocks ||
        c->dir.view.shape[1] < 2 || c->dir.view.shape[1] > 256 || col < 0 || col >= c->dir.view.shape[1] - 1) {
        tcol_release(c);
        return corrupt("a packed term table of the wrong shape");
    }
    c->cols = (int)c->dir.view.shape[1] - 1;
    c->col = col;
    c->n = rows;
    return 0;
}

/* pack_term_table(table) -> (directory, bits): bytes of uint32 [B, C + 1] and of uint8 (its
 * padding included) from a C-contiguous [rows, C] table of integers below 2**32: per block of
 * TABLE_ROWS rows, each column's smallest value, and its offsets from it bit-packed as wide as the
 * largest (the block's missing rows, in the last one, repeat its last row). */
static PyObject *k_pack_term_table(PyObject *self, PyObject *args) {
    PyObject *obj, *dir_b = NULL, *bits_b = NULL, *result = NULL;
    if (!PyArg_ParseTuple(args, "O", &obj)) return NULL;
    Arr t;
    if (arr_get_nd(obj, &t, "table", 1) < 0) return NULL;
    Py_ssize_t rows = t.view.ndim == 2 ? t.view.shape[0] : 0, cols = t.view.ndim == 2 ? t.view.shape[1] : 0;
    const char *fmt = t.view.format ? t.view.format : "B";
    while (*fmt == '<' || *fmt == '=' || *fmt == '@' || *fmt == '|') fmt++;
    if (t.view.ndim != 2 || rows < 1 || cols < 1 || cols > 255 || (strchr("bhilq", *fmt) && t.size < 8)) {
        /* at() reads a narrower signed integer as unsigned: a negative one would pack as a pointer
         * (an int64's reads as one past 2**32, which is refused below) */
        PyErr_SetString(PyExc_ValueError,
                        "pack_term_table: expected a table of unsigned integers or int64, of 1 to 255 columns and a row or more");
        arr_release(&t);
        return NULL;
    }
    Py_ssize_t n_blocks = (rows + TABLE_ROWS - 1) / TABLE_ROWS;
    unsigned char *widths = PyMem_Malloc((size_t)(n_blocks * cols));
    dir_b = PyBytes_FromStringAndSize(NULL, n_blocks * (cols + 1) * (Py_ssize_t)sizeof(uint32_t));
    if (!widths || !dir_b) {
        if (!widths) PyErr_NoMemory();
        goto done;
    }
    uint32_t *dir = (uint32_t *)PyBytes_AS_STRING(dir_b);
    /* the writer's table is uint32: read as such, not through at()'s switch per value */
    const uint32_t *u32 = t.size == 4 ? (const uint32_t *)t.p : NULL;
#define TABLE_AT(r, c) (u32 ? (uint64_t)u32[(r) * cols + (c)] : at(&t, (r) * cols + (c)))
    uint64_t size = 0, lo[256], hi[256];
    for (Py_ssize_t k = 0; k < n_blocks; k++) {
        Py_ssize_t r0 = k * TABLE_ROWS, r1 = r0 + TABLE_ROWS < rows ? r0 + TABLE_ROWS : rows;
        dir[k * (cols + 1) + cols] = (uint32_t)size;
        size += (uint64_t)cols;
        for (Py_ssize_t c = 0; c < cols; c++) {
            lo[c] = UINT64_MAX;
            hi[c] = 0;
        }
        for (Py_ssize_t r = r0; r < r1; r++) {
            for (Py_ssize_t c = 0; c < cols; c++) {
                uint64_t v = TABLE_AT(r, c); /* a negative int64 reads as one past 2**32 */
                if (v < lo[c]) lo[c] = v;
                if (v > hi[c]) hi[c] = v;
            }
        }
        for (Py_ssize_t c = 0; c < cols; c++) {
            if (hi[c] > UINT32_MAX) {
                PyErr_SetString(PyExc_ValueError, "pack_term_table: a pointer does not fit in 32 bits");
                goto done;
            }
            dir[k * (cols + 1) + c] = (uint32_t)lo[c];
            widths[k * cols + c] = (unsigned char)bit_width(hi[c] - lo[c]);
            size += 8 * (uint64_t)widths[k * cols + c];
        }
        if (size + PACK_PADDING > (uint64_t)UINT32_MAX + 1) {
            PyErr_SetString(PyExc_ValueError, "pack_term_table: the table passes 4 GB");
            goto done;
        }
    }
    bits_b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(size + PACK_PADDING));
    if (!bits_b) goto done;
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(bits_b);
    memset(p, 0, (size_t)(size + PACK_PADDING));
    for (Py_ssize_t k = 0; k < n_blocks; k++) {
        Py_ssize_t r0 = k * TABLE_ROWS;
        unsigned char *q = p + dir[k * (cols + 1) + cols];
        memcpy(q, widths + k * cols, (size_t)cols);
        q += cols;
        for (Py_ssize_t c = 0; c < cols; c++) {
            int w = widths[k * cols + c];
            uint64_t base = dir[k * (cols + 1) + c];
            for (Py_ssize_t r = 0; w && r < TABLE_ROWS; r++) {
                Py_ssize_t row = r0 + r < rows ? r0 + r : rows - 1;
                bits_put(q, (uint64_t)r * (uint64_t)w, TABLE_AT(row, c) - base);
            }
            q += 8 * w;
        }
    }
#undef TABLE_AT
    result = PyTuple_Pack(2, dir_b, bits_b);
done:
    PyMem_Free(widths);
    Py_XDECREF(dir_b);
    Py_XDECREF(bits_b);
    arr_release(&t);
    return result;
}

/* term_column(column, lo, hi) -> bytes: rows [lo, hi) of a packed column (directory, bits, column,
 * rows: term_table.PackedColumn.kernel_view) as int64, checked as the Postings check it. */
static PyObject *k_term_column(PyObject *self, PyObject *args) {
    PyObject *obj;
    Py_ssize_t lo, hi;
    if (!PyArg_ParseTuple(args, "Onn", &obj, &lo, &hi)) return NULL;
    TCol c;
    if (tcol_get(obj, &c, "column") < 0) return NULL;
    PyObject *out = NULL;
    if (lo < 0 || hi < lo || hi > c.n) {
        PyErr_SetString(PyExc_ValueError, "term_column: rows out of range");
    } else if (c.packed && tcol_check(&c, lo / TABLE_ROWS, hi / TABLE_ROWS + (hi % TABLE_ROWS != 0)) < 0) {
        /* only the blocks read: a merge reads a column a run of terms at a time */
    } else if ((out = PyBytes_FromStringAndSize(NULL, (hi - lo) * (Py_ssize_t)sizeof(int64_t)))) {
        int64_t *v = (int64_t *)PyBytes_AS_STRING(out);
        if (!c.packed) {
            for (Py_ssize_t i = lo; i < hi; i++) v[i - lo] = (int64_t)at(&c.a, i);
        } else { /* a block at a time: its column's place and width found once, not per row */
            const uint32_t *dir = (const uint32_t *)c.dir.p;
            for (Py_ssize_t i = lo; i < hi;) {
                Py_ssize_t k = i / TABLE_ROWS, end = (k + 1) * TABLE_ROWS < hi ? (k + 1) * TABLE_ROWS : hi;
                const uint32_t *d = dir + k * (c.cols + 1);
                const unsigned char *w = c.bits.p + d[c.cols];
                uint64_t before = 0;
                for (int j = 0; j < c.col; j++) before += w[j];
                const unsigned char *q = w + c.cols + 8 * before;
                int b = w[c.col];
                for (; i < end; i++) v[i - lo] = (int64_t)(d[c.col] + bits_at(q, (uint64_t)(i % TABLE_ROWS) * (uint64_t)b, b));
            }
        }
    }
    tcol_release(&c);
    return out;
}
