/*
 * The compiler's inner loops in C, each giving the arrays of the numpy code it stands in for (native.py says
 * which; the numpy code runs where this library cannot be built):
 *
 * - cm_effect_levels: the walk of a counted index's entries over their tokens' bytes (counted_index.py).
 * - cm_byte_classes, cm_class_columns: dfa.py's byte_classes (bytes every state treats alike, and the table
 *   with one column per class).
 * - cm_minimize: the minimal automaton of a byte-level DFA in one call: byte classes, trim, partition
 *   refinement, and the quotient numbered breadth-first from the start in byte order (the numbering of dfa.py's
 *   minimize, so that equal languages give equal arrays whichever implementation ran). The refinement is
 *   Valmari and Lehtinen's for partial transition functions ("Efficient minimization of DFAs with partial
 *   transition functions", STACS 2008; the compact form of Valmari, "Fast brief practical DFA minimization",
 *   Information Processing Letters 112(6), 2012): two refinable partitions, the states into blocks and the
 *   transitions into cords (a cord: transitions of one label whose heads lie in one block), each refining the
 *   other, with Hopcroft's rule that a split set is used again only through its smaller half. O(m log n) for m
 *   transitions (here over byte classes) and n states; no sink state is added, so a missing transition costs
 *   nothing. Written here from the papers' description.
 * - cm_product: the product of two automata, numbered as compose.py's product numbers it.
 * - cm_tuples: the product of k automata with each state's tuple of part states (object_automaton.py's
 *   tagged_product, numbered as it numbers them).
 * - cm_match, cm_group_walk, cm_descend, cm_sort_triples: index/walk.py's pairing of a state group, its shared
 *   walk of the token trie, the level-wise walk from many starts (with its cap) and the sort of its triples.
 *
 * Plain C99, no global state: calls may run in parallel. What a call allocates for its caller is freed by the
 * matching cm_free_* function.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Resize the array p to n elements of its type, or run `fail` (return -1, goto the cleanup) when memory runs
 * out; p then keeps its old block, which the caller's cleanup frees. */
#define RESIZE(p, n, fail) do { void *r_ = realloc((p), (size_t)(n) * sizeof *(p)); if (!r_) { fail; } (p) = r_; } \
    while (0)

/* A refinable partition of the elements 0..n-1 into sets. The elements of a set are contiguous in `elems`,
 * from `first[s]` to `past[s]`; its marked elements sit at its front (`marked[s]` of them). */
typedef struct {
    int32_t *elems, *loc, *set, *first, *past, *marked, *touched;
    int32_t ntouched, nsets;
} partition;

static void partition_free(partition *p) {
    free(p->elems); free(p->loc); free(p->set); free(p->first); free(p->past); free(p->marked);
    free(p->touched);
}

/* n elements, all in set 0 (no set where n is 0). Returns 0, or -1 when memory runs out. */
static int partition_init(partition *p, int32_t n) {
    size_t e = (size_t)(n > 0 ? n : 1), s = e + 1;
    p->elems = malloc(e * sizeof(int32_t)); p->loc = malloc(e * sizeof(int32_t));
    p->set = malloc(e * sizeof(int32_t)); p->first = malloc(s * sizeof(int32_t));
    p->past = malloc(s * sizeof(int32_t)); p->marked = malloc(s * sizeof(int32_t));
    p->touched = malloc(s * sizeof(int32_t));
    if (!p->elems || !p->loc || !p->set || !p->first || !p->past || !p->marked || !p->touched) return -1;
    for (int32_t i = 0; i < n; i++) { p->elems[i] = i; p->loc[i] = i; p->set[i] = 0; }
    p->ntouched = 0;
    p->nsets = n > 0 ? 1 : 0;
    p->first[0] = 0; p->past[0] = n; p->marked[0] = 0;
    return 0;
}

/* Move element e to the marked front of its set. */
static inline void mark(partition *p, int32_t e) {
    int32_t s = p->set[e], i = p->loc[e], j = p->first[s] + p->marked[s];
    if (i < j) return; /* marked already */
    int32_t other = p->elems[j];
    p->elems[i] = other; p->loc[other] = i;
    p->elems[j] = e; p->loc[e] = j;
    if (p->marked[s]++ == 0) p->touched[p->ntouched++] = s;
}

/* Split every set with marked elements into its marked and unmarked parts (unless all were marked): the
 * smaller part becomes a new set, numbered after the others. Marks are cleared. */
static void split(partition *p) {
    while (p->ntouched) {
        int32_t s = p->touched[--p->ntouched], j = p->first[s] + p->marked[s];
        if (j == p->past[s]) { p->marked[s] = 0; continue; }
        int32_t z = p->nsets++;
        if (p->marked[s] <= p->past[s] - j) { p->first[z] = p->first[s]; p->past[z] = j; p->first[s] = j; }
        else { p->past[z] = p->past[s]; p->first[z] = j; p->past[s] = j; }
        for (int32_t i = p->first[z]; i < p->past[z]; i++) p->set[p->elems[i]] = z;
        p->marked[s] = p->marked[z] = 0;
    }
}

static uint64_t mix64(uint64_t x) { /* splitmix64's finalizer (Steele, Lea, Flood, OOPSLA 2014) */
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Byte classes: bytes whose columns of `trans` are equal share a class; classes numbered in order of their
 * first byte. Writes cls[256] and first_byte[classes]; returns the number of classes, or -2 for a target
 * outside -1..n-1. Columns are grouped by a hash, then checked in one pass over the rows (a strided comparison
 * of whole columns cost 35-55 ms at 50,000 states); should two different columns share a hash, the classes
 * are made by comparing whole columns instead. */
static int byte_classes(int64_t n, const int32_t *trans, uint8_t *cls, int *first_byte, int check) {
    uint64_t h[256];
    memset(h, 0, sizeof h);
    for (int64_t s = 0; s < n; s++) {
#ifdef CM_TEST_COLLISIONS /* every multiplier 1, so that columns (0, 1) and (1, 0) collide (the tests) */
        uint64_t m = 1;
#else
        uint64_t m = mix64((uint64_t)s) | 1u;
#endif
        const int32_t *row = trans + s * 256;
        int bad = 0;
        for (int b = 0; b < 256; b++) {
            bad |= row[b] < -1 || row[b] >= n;
            h[b] += (uint64_t)(uint32_t)(row[b] + 1) * m;
        }
        if (bad && check) return -2;
    }
    int k = 0;
    for (int b = 0; b < 256; b++) {
        int found = -1;
        for (int c = 0; c < k && found < 0; c++)
            if (h[first_byte[c]] == h[b]) found = c;
        if (found < 0) { found = k; first_byte[k++] = b; }
        cls[b] = (uint8_t)found;
    }
    int rep[256], differ = 0;
    for (int b = 0; b < 256; b++) rep[b] = first_byte[cls[b]];
    for (int64_t s = 0; s < n && !differ; s++) {
        const int32_t *row = trans + s * 256;
        for (int b = 0; b < 256; b++) differ |= row[b] != row[rep[b]];
    }
    if (!differ) return k;
    k = 0; /* a collision: classes by whole columns */
    for (int b = 0; b < 256; b++) {
        int found = -1;
        for (int c = 0; c < k && found < 0; c++) {
            int r = first_byte[c];
            int64_t s = 0;
            while (s < n && trans[s * 256 + r] == trans[s * 256 + b]) s++;
            if (s == n) found = c;
        }
        if (found < 0) { found = k; first_byte[k++] = b; }
        cls[b] = (uint8_t)found;
    }
    return k;
}

/*
 * cm_byte_classes: the byte classes of (n, trans) as dfa.py's byte_classes makes them: writes cls[256] (each
 * byte's class, numbered in order of first byte) and first_byte[0:k] (each class's first byte). Returns k;
 * with `check`, -2 for a target outside -1..n-1 (without it the values may be any: keys, not targets).
 */
int64_t cm_byte_classes(int64_t n, const int32_t *trans, uint8_t *cls, int32_t *first_byte, int check) {
    int fb[256];
    int k = byte_classes(n, trans, cls, fb, check);
    for (int c = 0; c < k; c++) first_byte[c] = fb[c];
    return k;
}

/* cm_class_columns: out (n, k), row s = trans[s] at the bytes first_byte[0:k]. */
void cm_class_columns(int64_t n, const int32_t *trans, int64_t k, const int32_t *first_byte, int32_t *out) {
    for (int64_t s = 0; s < n; s++) {
        const int32_t *row = trans + s * 256;
        int32_t *o = out + s * k;
        for (int64_t c = 0; c < k; c++) o[c] = row[first_byte[c]];
    }
}

/*
 * cm_effect_levels: counted_index.py's TokenEffects.effect_ids, its walk of the entries' bytes level by level.
 * Entries 0..m-1 are sorted longest token first; active[j] (j < levels): how many are longer than j. From level
 * j0 on, entry i at level j < its length reads byte bytes[j * vocab + tok[i]] (the padded token matrix, one row
 * per position): at = cur[i] * 256 + byte; cur[i] = trans[at]; e = effect[at]; ids[i] = comp[ids[i] * width
 * + e] (e = 0: unchanged). A level is applied only when every pair it needs is in comp (comp_rows rows of width
 * columns, -1 for a pair not composed yet; an id past comp_rows has none but its column 0); otherwise nothing
 * of that level is applied, its entries that need a missing pair are written to miss (room for active[j]),
 * their count to *nmiss, and the level is returned, for the caller to compose those pairs (in the order the
 * numpy loop does) and call again from it. Returns `levels` once every level is applied. The entries are a
 * walk's, each token read whole from its state; one whose state dies (-1) is left there (no read outside the
 * tables).
 */
int64_t cm_effect_levels(int64_t levels, const int64_t *active, int64_t j0, const int32_t *tok, int64_t *cur,
                         int64_t *ids, const uint8_t *bytes, int64_t vocab, const int32_t *trans,
                         const int32_t *effect, const int64_t *comp, int64_t comp_rows, int64_t width,
                         int64_t *miss, int64_t *nmiss) {
    *nmiss = 0;
    for (int64_t j = j0; j < levels; j++) {
        int64_t m = active[j], k = 0;
        const uint8_t *col = bytes + j * vocab;
        for (int64_t i = 0; i < m; i++) {
            if (cur[i] < 0) continue;
            int64_t e = effect[cur[i] * 256 + col[tok[i]]];
            if (e && (ids[i] >= comp_rows || comp[ids[i] * width + e] < 0)) miss[k++] = i;
        }
        if (k) { *nmiss = k; return j; }
        for (int64_t i = 0; i < m; i++) {
            if (cur[i] < 0) continue;
            int64_t at = cur[i] * 256 + col[tok[i]], e = effect[at];
            cur[i] = trans[at];
            if (e) ids[i] = comp[ids[i] * width + e];
        }
    }
    return levels;
}

/* Work arrays of one call, freed together. */
typedef struct {
    int32_t *ct, *alive, *queue, *in_at, *in_src, *live, *tail, *head, *order, *at, *in_tr, *num;
    partition blocks, cords;
} work;

static void work_free(work *w) {
    free(w->ct); free(w->alive); free(w->queue); free(w->in_at); free(w->in_src); free(w->live);
    free(w->tail); free(w->head); free(w->order); free(w->at); free(w->in_tr); free(w->num);
    partition_free(&w->blocks); partition_free(&w->cords);
}

/* alive[s] = 1 for the states reachable from `start` that can reach an accepting state (over the class table
 * `ct`, n x k). Returns the number of them, or -1 when memory runs out. */
static int64_t trim(work *w, int64_t n, int k, const uint8_t *accepting, int64_t start) {
    int32_t *ct = w->ct, *seen = w->alive, *queue = w->queue;
    memset(seen, 0, (size_t)n * sizeof(int32_t));
    int64_t head = 0, tail = 0;
    seen[start] = 1; queue[tail++] = (int32_t)start;
    while (head < tail) { /* forwards: seen = 1 */
        int32_t s = queue[head++];
        for (int c = 0; c < k; c++) {
            int32_t t = ct[(int64_t)s * k + c];
            if (t >= 0 && !seen[t]) { seen[t] = 1; queue[tail++] = t; }
        }
    }
    /* predecessors among the reachable states (counting sort by target) */
    w->in_at = calloc((size_t)n + 1, sizeof(int32_t));
    if (!w->in_at) return -1;
    int64_t m = 0;
    for (int64_t i = 0; i < tail; i++)
        for (int c = 0; c < k; c++) {
            int32_t t = ct[(int64_t)queue[i] * k + c];
            if (t >= 0) { w->in_at[t + 1]++; m++; }
        }
    for (int64_t s = 0; s < n; s++) w->in_at[s + 1] += w->in_at[s];
    w->in_src = malloc((size_t)(m > 0 ? m : 1) * sizeof(int32_t));
    int32_t *fill = malloc((size_t)n * sizeof(int32_t));
    if (!w->in_src || !fill) { free(fill); return -1; }
    memcpy(fill, w->in_at, (size_t)n * sizeof(int32_t));
    for (int64_t i = 0; i < tail; i++)
        for (int c = 0; c < k; c++) {
            int32_t s = queue[i], t = ct[(int64_t)s * k + c];
            if (t >= 0) w->in_src[fill[t]++] = s;
        }
    free(fill);
    /* backwards from the accepting reachable states: seen = 2 */
    int64_t reach = tail, h2 = 0, t2 = 0;
    for (int64_t i = 0; i < reach; i++)
        if (accepting[queue[i]]) seen[queue[i]] = 2;
    int32_t *back = malloc((size_t)(reach > 0 ? reach : 1) * sizeof(int32_t));
    if (!back) return -1;
    for (int64_t i = 0; i < reach; i++)
        if (seen[queue[i]] == 2) back[t2++] = queue[i];
    while (h2 < t2) {
        int32_t t = back[h2++];
        for (int32_t j = w->in_at[t]; j < w->in_at[t + 1]; j++) {
            int32_t s = w->in_src[j];
            if (seen[s] == 1) { seen[s] = 2; back[t2++] = s; }
        }
    }
    free(back);
    for (int64_t s = 0; s < n; s++) seen[s] = seen[s] == 2;
    return t2;
}

/*
 * cm_minimize: the minimal DFA of the language of (trans, accepting, start).
 *   n: states; trans: int32 (n, 256), the state after each byte or -1; accepting: uint8 (n,); start: a state.
 *   out_trans: int32 room for (n, 256); out_accepting: uint8 room for (n,).
 * Returns the minimal automaton's number of states m (written to out_trans[0:m], out_accepting[0:m]; its start
 * is state 0, states numbered breadth-first from it, each state's targets in byte order, -1 for no
 * transition), 0 when the language is empty, -1 when memory runs out, -2 for a target out of range.
 */
int64_t cm_minimize(int64_t n, const int32_t *trans, const uint8_t *accepting, int64_t start,
                    int32_t *out_trans, uint8_t *out_accepting) {
    if (n <= 0 || start < 0 || start >= n) return 0;
    uint8_t cls[256];
    int first_byte[256];
    int k = byte_classes(n, trans, cls, first_byte, 1);
    if (k < 0) return k;
    work w;
    memset(&w, 0, sizeof w);
    int64_t result = -1;
    w.ct = malloc((size_t)n * k * sizeof(int32_t));
    w.alive = malloc((size_t)n * sizeof(int32_t));
    w.queue = malloc((size_t)n * sizeof(int32_t));
    w.num = malloc((size_t)n * sizeof(int32_t));
    if (!w.ct || !w.alive || !w.queue || !w.num) goto done;
    for (int64_t s = 0; s < n; s++)
        for (int c = 0; c < k; c++) w.ct[s * k + c] = trans[s * 256 + first_byte[c]];
    int64_t live_n = trim(&w, n, k, accepting, start);
    if (live_n < 0) goto done;
    if (!w.alive[start]) { result = 0; goto done; }
    /* the live states, numbered 0..L-1 in state order */
    int32_t L = 0;
    w.live = malloc((size_t)live_n * sizeof(int32_t));
    if (!w.live) goto done;
    for (int64_t s = 0; s < n; s++) {
        w.num[s] = w.alive[s] ? L : -1;
        if (w.alive[s]) w.live[L++] = (int32_t)s;
    }
    /* the transitions among live states, by label (class): counting sort */
    int64_t m = 0;
    int64_t count[257];
    memset(count, 0, sizeof count);
    for (int32_t q = 0; q < L; q++)
        for (int c = 0; c < k; c++) {
            int32_t t = w.ct[(int64_t)w.live[q] * k + c];
            if (t >= 0 && w.num[t] >= 0) { count[c + 1]++; m++; }
        }
    if (m >= INT32_MAX) goto done;
    size_t mm = (size_t)(m > 0 ? m : 1);
    w.tail = malloc(mm * sizeof(int32_t)); w.head = malloc(mm * sizeof(int32_t));
    w.order = malloc(mm * sizeof(int32_t)); w.at = calloc((size_t)L + 1, sizeof(int32_t));
    w.in_tr = malloc(mm * sizeof(int32_t));
    if (!w.tail || !w.head || !w.order || !w.at || !w.in_tr) goto done;
    for (int c = 0; c < k; c++) count[c + 1] += count[c];
    int64_t e = 0;
    for (int32_t q = 0; q < L; q++)
        for (int c = 0; c < k; c++) {
            int32_t t = w.ct[(int64_t)w.live[q] * k + c];
            if (t >= 0 && w.num[t] >= 0) {
                w.tail[e] = q; w.head[e] = w.num[t];
                w.order[count[c]++] = (int32_t)e; /* count[c] ends at the start of label c + 1 */
                w.at[w.num[t] + 1]++;
                e++;
            }
        }
    /* incoming transitions of each live state */
    for (int32_t q = 0; q < L; q++) w.at[q + 1] += w.at[q];
    {
        int32_t *fill = malloc(((size_t)L + 1) * sizeof(int32_t));
        if (!fill) goto done;
        memcpy(fill, w.at, ((size_t)L + 1) * sizeof(int32_t));
        for (int64_t i = 0; i < m; i++) w.in_tr[fill[w.head[i]]++] = (int32_t)i;
        free(fill);
    }
    /* blocks: accepting against the rest */
    if (partition_init(&w.blocks, L) || partition_init(&w.cords, (int32_t)m)) goto done;
    for (int32_t q = 0; q < L; q++)
        if (accepting[w.live[q]]) mark(&w.blocks, q);
    split(&w.blocks);
    /* cords: one per label, transitions in label order */
    partition *C = &w.cords;
    C->nsets = 0;
    for (int64_t i = 0; i < m; i++) {
        int32_t t = w.order[i];
        C->elems[i] = t; C->loc[t] = (int32_t)i;
    }
    {
        int64_t lo = 0;
        for (int c = 0; c < k; c++) {
            int64_t hi = count[c]; /* the end of label c's transitions (after the fill above) */
            if (hi > lo) {
                int32_t z = C->nsets++;
                C->first[z] = (int32_t)lo; C->past[z] = (int32_t)hi; C->marked[z] = 0;
                for (int64_t i = lo; i < hi; i++) C->set[C->elems[i]] = z;
            }
            lo = hi;
        }
    }
    /* refine: each cord splits the blocks by the tails of its transitions; each new block (the smaller half
     * of a split; block 0, the whole set at first, never) splits the cords by the heads of theirs */
    partition *B = &w.blocks;
    int32_t b = 1, c = 0;
    while (c < C->nsets) {
        for (int32_t i = C->first[c]; i < C->past[c]; i++) mark(B, w.tail[C->elems[i]]);
        split(B);
        c++;
        while (b < B->nsets) {
            for (int32_t i = B->first[b]; i < B->past[b]; i++) {
                int32_t q = B->elems[i];
                for (int32_t j = w.at[q]; j < w.at[q + 1]; j++) mark(C, w.in_tr[j]);
            }
            split(C);
            b++;
        }
    }
    /* the quotient, numbered breadth-first from the start's block in byte order */
    {
        int32_t *id = w.queue; /* reused: block -> new number, -1 before it is met */
        int32_t *bq = w.alive; /* reused: blocks in the order met */
        for (int32_t i = 0; i < B->nsets; i++) id[i] = -1;
        int32_t met = 0, done_n = 0;
        int32_t sb = B->set[w.num[start]];
        id[sb] = met; bq[met++] = sb;
        while (done_n < met) {
            int32_t blk = bq[done_n];
            int32_t rep = w.live[B->elems[B->first[blk]]];
            const int32_t *row = trans + (int64_t)rep * 256;
            int32_t *out = out_trans + (int64_t)done_n * 256;
            for (int x = 0; x < 256; x++) {
                int32_t t = row[x];
                if (t < 0 || w.num[t] < 0) { out[x] = -1; continue; }
                int32_t tb = B->set[w.num[t]];
                if (id[tb] < 0) { id[tb] = met; bq[met++] = tb; }
                out[x] = id[tb];
            }
            out_accepting[done_n] = accepting[rep] ? 1 : 0;
            done_n++;
        }
        result = met;
    }
done:
    work_free(&w);
    return result;
}

/* ------------------------------------------------------------------------------------------------------ */
/* The product automaton of two DFAs without counter markers (compose.py's product). */

/* An open-addressing table from a pair's key to its state (or -2 while a level's new pairs are numbered). */
typedef struct {
    int64_t *keys; /* -1: empty */
    int32_t *vals;
    int64_t cap, used;
} pair_table;

static int table_init(pair_table *h, int64_t cap) {
    h->cap = cap; h->used = 0;
    h->keys = malloc((size_t)cap * sizeof(int64_t));
    h->vals = malloc((size_t)cap * sizeof(int32_t));
    if (!h->keys || !h->vals) return -1;
    for (int64_t i = 0; i < cap; i++) h->keys[i] = -1;
    return 0;
}

/* The slot of `key`: where it is, or the empty slot where it would go. */
static inline int64_t table_slot(const pair_table *h, int64_t key) {
    int64_t i = (int64_t)(mix64((uint64_t)key) & (uint64_t)(h->cap - 1));
    while (h->keys[i] != -1 && h->keys[i] != key) i = (i + 1) & (h->cap - 1);
    return i;
}

static int table_grow(pair_table *h) {
    pair_table bigger;
    if (table_init(&bigger, h->cap * 2)) { free(bigger.keys); free(bigger.vals); return -1; }
    for (int64_t i = 0; i < h->cap; i++)
        if (h->keys[i] != -1) {
            int64_t j = table_slot(&bigger, h->keys[i]);
            bigger.keys[j] = h->keys[i]; bigger.vals[j] = h->vals[i];
        }
    bigger.used = h->used;
    free(h->keys); free(h->vals);
    *h = bigger;
    return 0;
}

static int cmp_i64(const void *x, const void *y) {
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* What cm_product built; freed by cm_free_product once copied out. */
typedef struct {
    int32_t *trans;  /* (pairs, 256) */
    uint8_t *accepting;
    int64_t pairs;
} product_out;

void cm_free_product(product_out *out) {
    free(out->trans); free(out->accepting);
    out->trans = NULL; out->accepting = NULL; out->pairs = 0;
}

/* The targets of pair (sa, sb) on byte x as a key (sa' + 1) * width + (sb' + 1), or -1 when the pair is not
 * built (mode 0 "or" and 3 "xor": either side live; 1 "and": both; 2 "minus": the left side). */
static inline int64_t pair_target(const int32_t *ta, const int32_t *tb, int64_t sa, int64_t sb, int x, int mode,
                                  int64_t width) {
    int64_t na = sa >= 0 ? ta[sa * 256 + x] : -1, nb = sb >= 0 ? tb[sb * 256 + x] : -1;
    int live = mode == 1 ? (na >= 0 && nb >= 0) : mode == 2 ? na >= 0 : (na >= 0 || nb >= 0);
    return live ? (na + 1) * width + (nb + 1) : -1;
}

/*
 * cm_product: the product of automata a (na states, ta int32 (na, 256), acc_a uint8) and b, over the pairs
 * reachable from (start_a, start_b), a dead side written -1, accepting by `mode` (0 or, 1 and, 2 minus, 3 xor).
 * Pairs are numbered as compose.py's product numbers them: level by level from the start pair, each level's
 * new pairs in ascending key order. Writes a malloc'd (pairs, 256) table and accepting array to `out`
 * (cm_free_product frees them). Returns the number of pairs, -3 once more than `max_pairs` would be built
 * (nothing written), -4 for a start outside its automaton, -1 when memory runs out.
 */
int64_t cm_product(int64_t na, const int32_t *ta, const uint8_t *acc_a, int64_t start_a,
                   int64_t nb, const int32_t *tb, const uint8_t *acc_b, int64_t start_b,
                   int mode, int64_t max_pairs, product_out *out) {
    int64_t width = nb + 1, room = 1024, pairs = 1, result = -1;
    int64_t *pa = malloc((size_t)room * sizeof(int64_t)), *pb = malloc((size_t)room * sizeof(int64_t));
    int64_t *fresh = NULL, fresh_room = 0;
    int32_t *trans = malloc((size_t)room * 256 * sizeof(int32_t));
    pair_table h;
    memset(&h, 0, sizeof h);
    out->trans = NULL; out->accepting = NULL; out->pairs = 0;
    if (!pa || !pb || !trans || table_init(&h, 4096)) goto fail;
    if (start_a < 0 || start_a >= na || start_b < 0 || start_b >= nb) { result = -4; goto fail; }
    if (max_pairs < 1) { result = -3; goto fail; }
    pa[0] = start_a; pb[0] = start_b;
    {
        int64_t key = (start_a + 1) * width + start_b + 1, s = table_slot(&h, key);
        h.keys[s] = key; h.vals[s] = 0; h.used = 1;
    }
    int64_t lo = 0, hi = 1;
    while (lo < hi) {
        /* the level's new pairs */
        int64_t nfresh = 0;
        for (int64_t p = lo; p < hi; p++)
            for (int x = 0; x < 256; x++) {
                int64_t key = pair_target(ta, tb, pa[p], pb[p], x, mode, width);
                if (key < 0) continue;
                int64_t s = table_slot(&h, key);
                if (h.keys[s] != -1) continue;
                if (pairs + nfresh + 1 > max_pairs) { result = -3; goto fail; }
                if ((h.used + 1) * 2 > h.cap) {
                    if (table_grow(&h)) goto fail;
                    s = table_slot(&h, key);
                }
                h.keys[s] = key; h.vals[s] = -2; h.used++;
                if (nfresh == fresh_room) {
                    fresh_room = fresh_room ? 2 * fresh_room : 1024;
                    RESIZE(fresh, fresh_room, goto fail);
                }
                fresh[nfresh++] = key;
            }
        qsort(fresh, (size_t)nfresh, sizeof(int64_t), cmp_i64);
        if (pairs + nfresh > room) {
            while (pairs + nfresh > room) room *= 2;
            RESIZE(pa, room, goto fail);
            RESIZE(pb, room, goto fail);
            RESIZE(trans, room * 256, goto fail);
        }
        for (int64_t i = 0; i < nfresh; i++) {
            int64_t key = fresh[i];
            h.vals[table_slot(&h, key)] = (int32_t)(pairs + i);
            pa[pairs + i] = key / width - 1; pb[pairs + i] = key % width - 1;
        }
        /* the level's rows */
        for (int64_t p = lo; p < hi; p++) {
            int32_t *row = trans + p * 256;
            for (int x = 0; x < 256; x++) {
                int64_t key = pair_target(ta, tb, pa[p], pb[p], x, mode, width);
                row[x] = key < 0 ? -1 : h.vals[table_slot(&h, key)];
            }
        }
        pairs += nfresh;
        lo = hi; hi = pairs;
    }
    out->accepting = malloc((size_t)pairs);
    if (!out->accepting) goto fail;
    for (int64_t p = 0; p < pairs; p++) {
        int in_a = pa[p] >= 0 && acc_a[pa[p]], in_b = pb[p] >= 0 && acc_b[pb[p]];
        out->accepting[p] = (uint8_t)(mode == 0 ? (in_a || in_b) : mode == 1 ? (in_a && in_b)
                                      : mode == 2 ? (in_a && !in_b) : (in_a != in_b));
    }
    out->trans = trans; out->pairs = pairs;
    trans = NULL;
    result = pairs;
fail:
    free(pa); free(pb); free(fresh); free(trans); free(h.keys); free(h.vals);
    if (result < 0) { free(out->accepting); out->accepting = NULL; }
    return result;
}

/* ------------------------------------------------------------------------------------------------------ */
/* The product of k tagged automata over their reachable tuples (object_automaton.py's tagged_product). */

/* What cm_tuples built; freed by cm_free_tuples once copied out. */
typedef struct {
    int32_t *trans;   /* (count, 256) */
    int32_t *tuples;  /* (count, k): each state's part states, -1 for a dead part */
    int64_t count;
} tuples_out;

void cm_free_tuples(tuples_out *out) {
    free(out->trans); free(out->tuples);
    out->trans = NULL; out->tuples = NULL; out->count = 0;
}

/* The key of the tuple the parts of `tup` reach on byte x, (t_0 + 1) * radix[0] + ... + (t_{k-1} + 1), or -1
 * when it is not built (need_first: its first part dead; else: every part dead). */
static inline int64_t tuple_target(int k, const int32_t *const *tables, const int32_t *tup, int x,
                                   const int64_t *radix, int need_first) {
    int64_t key = 0;
    int live = 0;
    for (int j = 0; j < k; j++) {
        int64_t t = tup[j] >= 0 ? tables[j][(int64_t)tup[j] * 256 + x] : -1;
        if (t >= 0) live = need_first ? (live || j == 0) : 1;
        key += (t + 1) * radix[j];
    }
    return live ? key : -1;
}

/*
 * cm_tuples: the product of k automata (part j: ns[j] states, tables[j] int32 (ns[j], 256)) over the tuples of
 * states reachable from `starts`, a dead part written -1, every byte alike (counter markers included). A tuple
 * is built when its first part is live (need_first) or any part is. Tuples are numbered as tagged_product
 * numbers them: level by level from the start tuple, each level's new tuples in ascending key order, the key
 * (t_0 + 1) * radix[0] + ... with radix[j] the product of (ns[i] + 1) for i > j (the caller makes sure the
 * product of all fits in 62 bits): lexicographic order of the tuples, -1 first. Writes malloc'd tables to `out`
 * (cm_free_tuples frees them). Returns the number of tuples, -3 once more than `max_count` would be built
 * (nothing written), -4 for a start outside its automaton or k outside 1..16, -1 when memory runs out.
 */
int64_t cm_tuples(int k, const int64_t *ns, const int32_t *const *tables, const int64_t *starts, int need_first,
                  int64_t max_count, tuples_out *out) {
    int64_t radix[16], room = 1024, count = 1, result = -1;
    int32_t *tup = NULL, *trans = NULL;
    int64_t *fresh = NULL, fresh_room = 0;
    pair_table h;
    memset(&h, 0, sizeof h);
    out->trans = NULL; out->tuples = NULL; out->count = 0;
    if (k < 1 || k > 16) return -4;
    for (int j = 0; j < k; j++)
        if (starts[j] < 0 || starts[j] >= ns[j]) return -4;
    if (max_count < 1) return -3;
    radix[k - 1] = 1;
    for (int j = k - 2; j >= 0; j--) radix[j] = radix[j + 1] * (ns[j + 1] + 1);
    tup = malloc((size_t)room * k * sizeof(int32_t));
    trans = malloc((size_t)room * 256 * sizeof(int32_t));
    if (!tup || !trans || table_init(&h, 4096)) goto fail;
    int64_t key0 = 0;
    for (int j = 0; j < k; j++) { tup[j] = (int32_t)starts[j]; key0 += (starts[j] + 1) * radix[j]; }
    {
        int64_t s = table_slot(&h, key0);
        h.keys[s] = key0; h.vals[s] = 0; h.used = 1;
    }
    int64_t lo = 0, hi = 1;
    while (lo < hi) {
        int64_t nfresh = 0;
        for (int64_t p = lo; p < hi; p++)
            for (int x = 0; x < 256; x++) {
                int64_t key = tuple_target(k, tables, tup + p * k, x, radix, need_first);
                if (key < 0) continue;
                int64_t s = table_slot(&h, key);
                if (h.keys[s] != -1) continue;
                if (count + nfresh + 1 > max_count) { result = -3; goto fail; }
                if ((h.used + 1) * 2 > h.cap) {
                    if (table_grow(&h)) goto fail;
                    s = table_slot(&h, key);
                }
                h.keys[s] = key; h.vals[s] = -2; h.used++;
                if (nfresh == fresh_room) {
                    fresh_room = fresh_room ? 2 * fresh_room : 1024;
                    RESIZE(fresh, fresh_room, goto fail);
                }
                fresh[nfresh++] = key;
            }
        qsort(fresh, (size_t)nfresh, sizeof(int64_t), cmp_i64);
        if (count + nfresh > room) {
            while (count + nfresh > room) room *= 2;
            RESIZE(tup, room * k, goto fail);
            RESIZE(trans, room * 256, goto fail);
        }
        for (int64_t i = 0; i < nfresh; i++) {
            int64_t key = fresh[i];
            h.vals[table_slot(&h, key)] = (int32_t)(count + i);
            for (int j = 0; j < k; j++) tup[(count + i) * k + j] = (int32_t)((key / radix[j]) % (ns[j] + 1) - 1);
        }
        for (int64_t p = lo; p < hi; p++) {
            int32_t *row = trans + p * 256;
            for (int x = 0; x < 256; x++) {
                int64_t key = tuple_target(k, tables, tup + p * k, x, radix, need_first);
                row[x] = key < 0 ? -1 : h.vals[table_slot(&h, key)];
            }
        }
        count += nfresh;
        lo = hi; hi = count;
    }
    out->trans = trans; out->tuples = tup; out->count = count;
    trans = NULL; tup = NULL;
    result = count;
fail:
    free(tup); free(trans); free(fresh); free(h.keys); free(h.vals);
    return result;
}

/* ------------------------------------------------------------------------------------------------------ */
/* The pairing of a rep state with the members of a state group (index/walk.py's _match). */

/* What cm_match built; freed by cm_free_match once copied out. */
typedef struct {
    int64_t *cols;  /* (ncols,): the rep states paired, in column order */
    int64_t *phi;   /* (ncols, k): column c's member states, -1 for none (column-major: a column is contiguous) */
    uint8_t *core;  /* (ncols, k) */
    int64_t ncols;
} match_out;

void cm_free_match(match_out *out) {
    free(out->cols); free(out->phi); free(out->core);
    out->cols = NULL; out->phi = NULL; out->core = NULL; out->ncols = 0;
}

/* Room for one more column; returns 0, or -1 when memory runs out. */
static int match_room(match_out *out, int64_t *room, int64_t k) {
    if (out->ncols < *room) return 0;
    int64_t more = *room ? 2 * *room : 64;
    RESIZE(out->cols, more, return -1);
    RESIZE(out->phi, more * k, return -1);
    RESIZE(out->core, more * k, return -1);
    *room = more;
    return 0;
}

static int new_column(match_out *out, int64_t *room, int64_t k, int64_t *col_of, int64_t state) {
    if (match_room(out, room, k)) return -1;
    int64_t c = out->ncols++;
    col_of[state] = c;
    out->cols[c] = state;
    for (int64_t i = 0; i < k; i++) out->phi[c * k + i] = -1;
    memset(out->core + c * k, 0, (size_t)k);
    return 0;
}

/*
 * cm_match: pair `rep` with each of `members` (int64 (k,)) breadth-first over the class transitions `ctrans`
 * (int32 (num_states, nc), -1 dead), visiting at most `max_pairs` rep states, as walk.py's _match does (its
 * docstring says what is paired and when a state is core; `kind`: int64 (num_states,), its row_kinds). Fills
 * col_of (int64 (num_states,), -1 for unpaired) and `out` (malloc'd; cm_free_match frees it): the columns in
 * the order _match makes them (each visit's new targets in ascending state order), phi and core. Returns the
 * number of columns, or -1 when memory runs out.
 */
int64_t cm_match(int64_t num_states, int64_t nc, const int32_t *ctrans, const int64_t *kind, int64_t rep,
                 int64_t k, const int64_t *members, int64_t max_pairs, int64_t *col_of, match_out *out) {
    int64_t room = 0, result = -1, qlen = 0, done = 0;
    memset(out, 0, sizeof *out);
    int64_t *queue = malloc((size_t)num_states * sizeof(int64_t));
    uint8_t *queued = calloc((size_t)num_states, 1);
    int64_t *pos = malloc((size_t)num_states * sizeof(int64_t));   /* a target's place among the distinct */
    int64_t *at = malloc((size_t)nc * sizeof(int64_t)), *slot = malloc((size_t)nc * sizeof(int64_t));
    int64_t *distinct = malloc((size_t)nc * sizeof(int64_t)), *fresh = malloc((size_t)nc * sizeof(int64_t));
    int64_t *val = malloc((size_t)nc * sizeof(int64_t)), *who = malloc((size_t)(k > 0 ? k : 1) * sizeof(int64_t));
    if (!queue || !queued || !pos || !at || !slot || !distinct || !fresh || !val || !who) goto done_;
    for (int64_t s = 0; s < num_states; s++) { col_of[s] = -1; pos[s] = -1; }
    if (new_column(out, &room, k, col_of, rep)) goto done_;
    for (int64_t i = 0; i < k; i++) out->phi[i] = members[i];
    queued[rep] = 1; queue[qlen++] = rep;
    while (done < qlen && done < max_pairs) {
        int64_t q = queue[done++], cq = col_of[q], w = 0;
        for (int64_t i = 0; i < k; i++)
            if (out->phi[cq * k + i] >= 0) who[w++] = i;
        if (!w) continue;
        /* the live classes of q and their distinct targets */
        const int32_t *a = ctrans + q * nc;
        int64_t L = 0, nd = 0;
        for (int64_t j = 0; j < nc; j++) {
            if (a[j] < 0) continue;
            int64_t t = a[j];
            if (pos[t] < 0) { pos[t] = nd; distinct[nd++] = t; }
            at[L] = j; slot[L] = pos[t]; L++;
        }
        /* columns for the targets not paired before, in ascending state order */
        int64_t nf = 0;
        for (int64_t d = 0; d < nd; d++)
            if (col_of[distinct[d]] < 0) fresh[nf++] = distinct[d];
        qsort(fresh, (size_t)nf, sizeof(int64_t), cmp_i64);
        for (int64_t f = 0; f < nf; f++)
            if (new_column(out, &room, k, col_of, fresh[f])) goto done_;
        int any = 0, all_here = 1;
        for (int64_t x = 0; x < w; x++) {
            int64_t i = who[x], mine = out->phi[cq * k + i];
            all_here &= mine == q;
            if (kind[mine] != kind[q]) continue;
            const int32_t *b = ctrans + mine * nc;
            int ok = 1;
            for (int64_t d = 0; d < nd; d++) val[d] = -2;
            for (int64_t l = 0; l < L && ok; l++) { /* one rep target, one member target */
                int64_t d = slot[l], v = b[at[l]];
                if (val[d] == -2) val[d] = v;
                else ok = val[d] == v;
            }
            for (int64_t d = 0; d < nd && ok; d++) { /* consistent with the member's earlier pairings */
                int64_t seen = out->phi[col_of[distinct[d]] * k + i];
                ok = seen < 0 || seen == val[d];
            }
            if (!ok) continue;
            for (int64_t d = 0; d < nd; d++) out->phi[col_of[distinct[d]] * k + i] = val[d];
            out->core[cq * k + i] = 1;
            any = 1;
        }
        for (int64_t d = 0; d < nd; d++) pos[distinct[d]] = -1;
        if (!any || all_here) continue;
        nf = 0;
        for (int64_t d = 0; d < nd; d++)
            if (!queued[distinct[d]]) fresh[nf++] = distinct[d];
        qsort(fresh, (size_t)nf, sizeof(int64_t), cmp_i64);
        for (int64_t f = 0; f < nf; f++) { queued[fresh[f]] = 1; queue[qlen++] = fresh[f]; }
    }
    result = out->ncols;
done_:
    free(queue); free(queued); free(pos); free(at); free(slot); free(distinct); free(fresh); free(val); free(who);
    if (result < 0) cm_free_match(out);
    return result;
}

/* ------------------------------------------------------------------------------------------------------ */
/* The shared walk of a state group over the token trie (index/walk.py's _walk_group). */

/* What cm_group_walk found; freed by cm_free_group_walk once copied out. */
typedef struct {
    int32_t *tok;       /* (ntok,): the tokens that end on a live walk from the rep */
    int64_t *end;       /* (ntok,): the rep's state after each */
    uint64_t *served;   /* (ntok, words): the members each serves */
    uint64_t *met;      /* (ntok, words): the members that met the rep's walk on the way */
    int64_t ntok, tok_room;
    int32_t *seed_depth; /* (nseed,): the depth index of each seed's node */
    int64_t *seed_node;  /* (nseed,): the node, numbered within its depth */
    int64_t *seed_cur;   /* (nseed,): the rep's state there */
    uint64_t *seed_drop; /* (nseed, words): the members that stop corresponding there */
    int64_t nseed, seed_room;
} group_walk_out;

void cm_free_group_walk(group_walk_out *out) {
    free(out->tok); free(out->end); free(out->served); free(out->met);
    free(out->seed_depth); free(out->seed_node); free(out->seed_cur); free(out->seed_drop);
    memset(out, 0, sizeof *out);
}

/* The trie, flattened across depths: node g (off[d] <= g < off[d + 1] at depth index d) has the last byte
 * byte[g], children cs[g]..ce[g] (flat numbers) and the token end[g] that ends there (-1: none). */
typedef struct {
    const int64_t *off;
    const uint8_t *byte;
    const int64_t *cs, *ce;
    const int32_t *end;
    int64_t depth;
    const int32_t *trans;            /* (states, 256) */
    const uint64_t *core, *same;     /* (states, words) */
    int64_t words;
    uint64_t *rbuf, *mbuf;           /* (depth + 1, words): the member bits carried at each depth */
    group_walk_out *out;
} group_walk;

static int grow_tokens(group_walk_out *o, int64_t words) {
    int64_t more = o->tok_room ? 2 * o->tok_room : 4096;
    RESIZE(o->tok, more, return -1);
    RESIZE(o->end, more, return -1);
    RESIZE(o->served, more * words, return -1);
    RESIZE(o->met, more * words, return -1);
    o->tok_room = more;
    return 0;
}

static int grow_seeds(group_walk_out *o, int64_t words) {
    int64_t more = o->seed_room ? 2 * o->seed_room : 1024;
    RESIZE(o->seed_depth, more, return -1);
    RESIZE(o->seed_node, more, return -1);
    RESIZE(o->seed_cur, more, return -1);
    RESIZE(o->seed_drop, more * words, return -1);
    o->seed_room = more;
    return 0;
}

/* Visit node g at depth index d in state cur, with the member bits its parent left at rbuf/mbuf[d] (r: those
 * it serves, m: those that met the rep's walk); it leaves its children's at rbuf/mbuf[d + 1], which no deeper
 * visit writes. Returns 0, or -1 when memory runs out. */
static int visit(group_walk *w, int64_t g, int64_t d, int64_t cur) {
    int64_t W = w->words;
    const uint64_t *r = w->rbuf + d * W, *m = w->mbuf + d * W, *core = w->core + cur * W, *same = w->same + cur * W;
    uint64_t *nr = w->rbuf + (d + 1) * W, *nm = w->mbuf + (d + 1) * W;
    for (int64_t x = 0; x < W; x++) nm[x] = m[x] | (r[x] & same[x]);
    group_walk_out *o = w->out;
    if (w->end[g] >= 0) {
        if (o->ntok == o->tok_room && grow_tokens(o, W)) return -1;
        o->tok[o->ntok] = w->end[g];
        o->end[o->ntok] = cur;
        memcpy(o->served + o->ntok * W, r, (size_t)W * sizeof(uint64_t));
        memcpy(o->met + o->ntok * W, nm, (size_t)W * sizeof(uint64_t));
        o->ntok++;
    }
    if (d + 1 >= w->depth) return 0;
    uint64_t anyn = 0, anyd = 0;
    for (int64_t x = 0; x < W; x++) {
        nr[x] = nm[x] | (r[x] & core[x]);
        anyd |= r[x] & ~nr[x];
        anyn |= nr[x];
    }
    if (anyd && w->ce[g] > w->cs[g]) {
        if (o->nseed == o->seed_room && grow_seeds(o, W)) return -1;
        o->seed_depth[o->nseed] = (int32_t)d;
        o->seed_node[o->nseed] = g - w->off[d];
        o->seed_cur[o->nseed] = cur;
        for (int64_t x = 0; x < W; x++) o->seed_drop[o->nseed * W + x] = r[x] & ~nr[x];
        o->nseed++;
    }
    if (!anyn) return 0;
    for (int64_t c = w->cs[g]; c < w->ce[g]; c++) {
        int32_t nxt = w->trans[cur * 256 + w->byte[c]];
        if (nxt >= 0 && visit(w, c, d + 1, nxt)) return -1;
    }
    return 0;
}

/*
 * cm_group_walk: the walk of the token trie from `rep` that a state group shares, as walk.py's _walk_group
 * makes it before its members' own walks: every live prefix, with the members it serves (r: every state on
 * its way core for them) and those that met the rep's walk (m), the tokens that end on it and, where members
 * stop corresponding (r & ~(m | r & core)) below a prefix with children, a seed for their own walks.
 * trans: int32 (states, 256); the flattened trie (see group_walk); core, same: uint64 (states, words). Writes
 * `out` (malloc'd; cm_free_group_walk frees it): tokens and seeds in depth-first order. Returns the number of
 * tokens, -1 when memory runs out, -2 for no words.
 */
int64_t cm_group_walk(const int32_t *trans, int64_t depth, const int64_t *off, const uint8_t *byte,
                      const int64_t *cs, const int64_t *ce, const int32_t *end, int64_t rep, int64_t words,
                      const uint64_t *core, const uint64_t *same, group_walk_out *out) {
    memset(out, 0, sizeof *out);
    if (words < 1) return -2;
    group_walk w = {off, byte, cs, ce, end, depth, trans, core, same, words, NULL, NULL, out};
    w.rbuf = calloc((size_t)((depth + 1) * words), sizeof(uint64_t));
    w.mbuf = calloc((size_t)((depth + 1) * words), sizeof(uint64_t));
    int64_t rc = -1;
    if (!w.rbuf || !w.mbuf) goto done_;
    if (depth == 0) { rc = 0; goto done_; }
    for (int64_t g = off[0]; g < off[1]; g++) {
        int32_t cur = trans[rep * 256 + byte[g]];
        if (cur < 0) continue;
        for (int64_t x = 0; x < words; x++) {
            w.rbuf[x] = core[rep * words + x];
            w.mbuf[x] = core[rep * words + x] & same[rep * words + x];
        }
        if (visit(&w, g, 0, cur)) goto done_;
    }
    rc = out->ntok;
done_:
    free(w.rbuf); free(w.mbuf);
    if (rc < 0) cm_free_group_walk(out);
    return rc;
}

/* ------------------------------------------------------------------------------------------------------ */
/* The level-wise walk of the token trie from many (start state, node, state) triples (index/walk.py's
 * _descend), with its cap on the entries of a start state. */

typedef struct {
    int32_t *s, *t, *n;  /* (count,): the (start state, token, next state) triples, in the order found */
    int64_t count, room;
    int64_t *capped;     /* (ncapped,): the start states capped, in the order capped */
    int64_t ncapped;
} descend_out;

void cm_free_descend(descend_out *out) {
    free(out->s); free(out->t); free(out->n); free(out->capped);
    memset(out, 0, sizeof *out);
}

typedef struct { int64_t *start, *node, *cur; int64_t len, room; } frontier;

static int frontier_push(frontier *f, int64_t s, int64_t g, int64_t c) {
    if (f->len == f->room) {
        int64_t more = f->room ? 2 * f->room : 4096;
        RESIZE(f->start, more, return -1);
        RESIZE(f->node, more, return -1);
        RESIZE(f->cur, more, return -1);
        f->room = more;
    }
    f->start[f->len] = s; f->node[f->len] = g; f->cur[f->len] = c; f->len++;
    return 0;
}

static int emit(descend_out *o, int64_t s, int32_t t, int64_t n) {
    if (o->count == o->room) {
        int64_t more = o->room ? 2 * o->room : 16384;
        RESIZE(o->s, more, return -1);
        RESIZE(o->t, more, return -1);
        RESIZE(o->n, more, return -1);
        o->room = more;
    }
    o->s[o->count] = (int32_t)s; o->t[o->count] = t; o->n[o->count] = (int32_t)n; o->count++;
    return 0;
}

/* Keep the triples of f whose start is not stopped. */
static void drop_stopped(frontier *f, const uint8_t *stopped) {
    int64_t k = 0;
    for (int64_t i = 0; i < f->len; i++)
        if (!stopped[f->start[i]]) {
            f->start[k] = f->start[i]; f->node[k] = f->node[i]; f->cur[k] = f->cur[i]; k++;
        }
    f->len = k;
}

/*
 * cm_descend: walk.py's _descend over the flattened trie (see group_walk; `below`: int64 (nodes,), the tokens
 * at or below each node), from the frontier (int64 (nf,) start states, depth-0 flat nodes, states) and the
 * seeds (int64 (ns,), sorted by depth index: seed_depth, start, flat node, state: they join the frontier after
 * their depth's tokens are reported, so only what lies below them is found). `cap` >= 0: a start state stops
 * once its entries, or its entries and the tokens below its live prefixes lookahead or more bytes below where it
 * began, pass cap (it is then capped); cap < 0: no cap. `limit` >= 0: return -5 as soon as more than limit
 * triples are found. Triples in _descend's order. Returns the number of triples, -1 when memory runs out.
 */
int64_t cm_descend(int64_t num_states, const int32_t *trans, int64_t depth, const uint8_t *byte,
                   const int64_t *cs, const int64_t *ce, const int32_t *end, const int64_t *below,
                   int64_t nf, const int64_t *f_start, const int64_t *f_node, const int64_t *f_cur,
                   int64_t ns, const int64_t *s_depth, const int64_t *s_start, const int64_t *s_node,
                   const int64_t *s_cur, int64_t cap, int64_t lookahead, int64_t limit, descend_out *out) {
    memset(out, 0, sizeof *out);
    frontier f = {0}, next = {0};
    int64_t rc = -1, sp = 0;
    int64_t *found = NULL, *began = NULL, *bound = NULL, *touched = NULL;
    uint8_t *stopped = calloc((size_t)num_states, 1), *capped = calloc((size_t)num_states, 1);
    if (!stopped || !capped) goto done_;
    if (cap >= 0) {
        found = calloc((size_t)num_states, sizeof(int64_t));
        began = malloc((size_t)num_states * sizeof(int64_t));
        bound = calloc((size_t)num_states, sizeof(int64_t));
        touched = malloc((size_t)num_states * sizeof(int64_t));
        out->capped = malloc((size_t)num_states * sizeof(int64_t));
        if (!found || !began || !bound || !touched || !out->capped) goto done_;
        for (int64_t s = 0; s < num_states; s++) began[s] = -1;
        for (int64_t i = 0; i < nf; i++) began[f_start[i]] = 0;
    }
    for (int64_t i = 0; i < nf; i++)
        if (frontier_push(&f, f_start[i], f_node[i], f_cur[i])) goto done_;
    for (int64_t d = 0; d < depth; d++) {
        for (int64_t i = 0; i < f.len; i++) { /* the tokens that end here */
            int32_t t = end[f.node[i]];
            if (t < 0) continue;
            if (emit(out, f.start[i], t, f.cur[i])) goto done_;
            if (limit >= 0 && out->count > limit) { rc = -5; goto done_; }
            if (cap >= 0) {
                int64_t st = f.start[i];
                if (++found[st] > cap && !capped[st]) {
                    capped[st] = 1; stopped[st] = 1; out->capped[out->ncapped++] = st;
                }
            }
        }
        for (; sp < ns && s_depth[sp] == d; sp++) { /* the seeds of this depth join */
            if (frontier_push(&f, s_start[sp], s_node[sp], s_cur[sp])) goto done_;
            if (cap >= 0 && began[s_start[sp]] < 0) began[s_start[sp]] = d;
        }
        if (out->ncapped) drop_stopped(&f, stopped);
        if (d + 1 >= depth || (f.len == 0 && sp >= ns)) break;
        next.len = 0; /* one byte down */
        for (int64_t i = 0; i < f.len; i++) {
            int64_t g = f.node[i], cur = f.cur[i];
            for (int64_t c = cs[g]; c < ce[g]; c++) {
                int32_t nxt = trans[cur * 256 + byte[c]];
                if (nxt >= 0 && frontier_push(&next, f.start[i], c, nxt)) goto done_;
            }
        }
        frontier tmp = f; f = next; next = tmp;
        if (cap >= 0 && f.len) { /* the start states whose entries and tokens below pass the cap */
            int64_t nt = 0, more = 0;
            for (int64_t i = 0; i < f.len; i++) {
                int64_t st = f.start[i];
                if (began[st] > d + 1 - lookahead) continue;
                if (bound[st] == 0) touched[nt++] = st;
                bound[st] += below[f.node[i]];
            }
            qsort(touched, (size_t)nt, sizeof(int64_t), cmp_i64);
            for (int64_t x = 0; x < nt; x++) {
                int64_t st = touched[x];
                if (bound[st] > 0 && !capped[st] && bound[st] + found[st] > cap) {
                    capped[st] = 1; stopped[st] = 1; out->capped[out->ncapped++] = st; more = 1;
                }
                bound[st] = 0;
            }
            if (more) drop_stopped(&f, stopped);
        }
    }
    rc = out->count;
done_:
    free(f.start); free(f.node); free(f.cur); free(next.start); free(next.node); free(next.cur);
    free(stopped); free(capped); free(found); free(began); free(bound); free(touched);
    if (rc < 0 && rc != -5) cm_free_descend(out);
    return rc;
}

/* ------------------------------------------------------------------------------------------------------ */
/* (state, token, next state) triples sorted by (state, token) (index/walk.py's _sorted_triples). */

/* Counting-sort positions: order[i] receives the indices 0..n-1 by ascending key (stable), keys in 0..range-1.
 * Returns 0, or -1 when memory runs out. */
static int counting_order(int64_t n, const int32_t *key, int64_t range, const int64_t *in, int64_t *order) {
    int64_t *at = calloc((size_t)range + 1, sizeof(int64_t));
    if (!at) return -1;
    for (int64_t i = 0; i < n; i++) at[key[in ? in[i] : i] + 1]++;
    for (int64_t v = 0; v < range; v++) at[v + 1] += at[v];
    for (int64_t i = 0; i < n; i++) {
        int64_t j = in ? in[i] : i;
        order[at[key[j]]++] = j;
    }
    free(at);
    return 0;
}

/*
 * cm_sort_triples: the n triples (s, t, x), every value >= 0, s < s_range and t < t_range, written to out_s,
 * out_t, out_x in ascending (s, t) order (two stable counting sorts: by t, then by s; O(n + ranges)). The
 * (s, t) pairs of a walk are distinct, so this is the order of a sort of the packed triples. Returns 0, or -1
 * when memory runs out.
 */
int64_t cm_sort_triples(int64_t n, const int32_t *s, const int32_t *t, const int32_t *x, int64_t s_range,
                        int64_t t_range, int32_t *out_s, int32_t *out_t, int32_t *out_x) {
    int64_t *by_t = malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    int64_t *order = malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    int64_t rc = -1;
    if (!by_t || !order) goto done_;
    if (counting_order(n, t, t_range, NULL, by_t) || counting_order(n, s, s_range, by_t, order)) goto done_;
    for (int64_t i = 0; i < n; i++) {
        int64_t j = order[i];
        out_s[i] = s[j]; out_t[i] = t[j]; out_x[i] = x[j];
    }
    rc = 0;
done_:
    free(by_t); free(order);
    return rc;
}
