/* dataset_folder.c — a data set laid out as torchvision's ImageFolder reads
 * it: ROOT/CLASS/.../IMAGE, one sub-folder per class, into the same
 * dataset a CSV gives, so nothing past the index knows the difference.
 *
 * Rules (torchvision's, except where noted):
 *   - classes are the sub-folders of ROOT in sorted (byte) order; their
 *     ids are their positions; symlinks are followed (to folders and files);
 *   - a class takes every image file below its folder, at any depth,
 *     ordered by folder path and then file name (sorted(os.walk(...)));
 *   - an image file is one whose name ends, in any case, in one of
 *     torchvision's IMG_EXTENSIONS; other files are skipped and counted in
 *     one note (torchvision skips them silently);
 *   - names starting with '.' (hidden files and folders, `.DS_Store`,
 *     `.ipynb_checkpoints`) are skipped without a note (torchvision keeps
 *     hidden class folders: that is how checkpoints folders become classes);
 *   - a class folder with no image is an error, as in torchvision; so is a
 *     root without class folders;
 *   - a symlinked folder that leads back into the data (to the root or a
 *     folder above it, to a class folder, or to a folder walked already:
 *     a loop) is not walked, with one note (torchvision follows it).
 * Messages about one sample name the image path itself where a CSV names
 * FILE:LINE (dataset_row_message).
 */
#define _XOPEN_SOURCE 700 /* realpath */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loader/dataset.h"

/* torchvision.datasets.folder.IMG_EXTENSIONS */
static const char *const image_exts[] = {".jpg", ".jpeg", ".png",  ".ppm", ".bmp",
                                         ".pgm", ".tif",  ".tiff", ".webp"};

#define WALK_MAX_DEPTH 64

static int is_image_name(const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof image_exts / sizeof image_exts[0]; i++) {
        size_t k = strlen(image_exts[i]);
        if (n > k && strcasecmp(name + n - k, image_exts[i]) == 0)
            return 1;
    }
    return 0;
}

typedef struct found {
    char *dir;  /* folder holding the file (for ordering) */
    char *path; /* full path */
} found;

/* A set of folders (device, inode): open addressing, grown at half full. */
typedef struct dirset {
    struct dirid {
        dev_t dev;
        ino_t ino;
        int used;
    } * slot;
    size_t n, cap;
} dirset;

static size_t dirset_pos(const dirset *s, dev_t dev, ino_t ino)
{
    uint64_t h = ((uint64_t)ino * 0x9e3779b97f4a7c15ull) ^ (uint64_t)dev;
    size_t i = (size_t)(h ^ (h >> 29)) & (s->cap - 1);
    while (s->slot[i].used && !(s->slot[i].dev == dev && s->slot[i].ino == ino))
        i = (i + 1) & (s->cap - 1);
    return i;
}

static int dirset_has(const dirset *s, const struct stat *st)
{
    return s->cap && s->slot[dirset_pos(s, st->st_dev, st->st_ino)].used;
}

static void dirset_add(dirset *s, dev_t dev, ino_t ino)
{
    if (2 * (s->n + 1) > s->cap) {
        dirset old = *s;
        s->cap = s->cap ? 2 * s->cap : 64;
        s->slot = xcalloc(s->cap, sizeof *s->slot);
        s->n = 0;
        for (size_t i = 0; i < old.cap; i++)
            if (old.slot[i].used)
                dirset_add(s, old.slot[i].dev, old.slot[i].ino);
        free(old.slot);
    }
    size_t i = dirset_pos(s, dev, ino);
    if (!s->slot[i].used) {
        s->slot[i] = (struct dirid){dev, ino, 1};
        s->n++;
    }
}

typedef struct walker {
    const char *root;
    found *files;
    size_t n, cap;
    uint32_t skipped;
    char first_skipped[ERR_MAX];
    dirset above;        /* the data root and every folder above it */
    dirset visited;      /* every class folder, and every folder walked */
    uint32_t unfollowed; /* folders not walked: back into the data, or read already */
    char first_unfollowed[ERR_MAX];
    int depth;
    errbuf *e;
} walker;

static char *join(const char *dir, const char *name)
{
    size_t dl = strlen(dir), nl = strlen(name);
    while (dl > 1 && dir[dl - 1] == '/')
        dl--;
    char *s = xmalloc(dl + nl + 2);
    memcpy(s, dir, dl);
    s[dl] = '/';
    memcpy(s + dl + 1, name, nl + 1);
    return s;
}

static void note_skip(walker *w, const char *path, const char *why)
{
    if (w->skipped++ == 0)
        snprintf(w->first_skipped, sizeof w->first_skipped, "%s: %s", path, why);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The visible entries of `dir`, sorted; NULL with e set on failure. */
static char **list_dir(const char *dir, size_t *count, errbuf *e)
{
    DIR *d = opendir(dir);
    if (!d) {
        errf(e, "%s: cannot open folder: %s", dir, strerror(errno));
        return NULL;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            names = xrealloc(names, cap * sizeof *names);
        }
        names[n++] = xstrdup(de->d_name);
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, cmp_str);
    *count = n;
    return names ? names : xcalloc(1, sizeof *names);
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* The data root and the folders above it, up to /, into w->above. */
static void note_root_and_above(walker *w)
{
    char *real = realpath(w->root, NULL);
    if (!real)
        return;
    for (;;) {
        struct stat st;
        if (stat(real, &st) == 0)
            dirset_add(&w->above, st.st_dev, st.st_ino);
        char *slash = strrchr(real, '/');
        if (!slash || (slash == real && !real[1]))
            break;
        slash[slash == real] = '\0'; /* "/a" -> "/" */
    }
    free(real);
}

/* A folder that leads back into the data (a symlink to the root, a folder
 * above it, another class's folder or one read already) is not walked:
 * its images would be counted again, or under the wrong class. */
static int unfollowed(walker *w, const char *dir, const struct stat *dst, int class_top)
{
    const char *why = dirset_has(&w->above, dst) ? "the data root or above it"
                      : !class_top && dirset_has(&w->visited, dst)
                          ? "a class folder or one read already"
                          : NULL;
    if (!why)
        return 0;
    if (w->unfollowed++ == 0) {
        char target[PATH_MAX > 4096 ? 4096 : PATH_MAX];
        ssize_t n = readlink(dir, target, sizeof target - 1);
        if (n >= 0) {
            target[n] = '\0';
            snprintf(w->first_unfollowed, sizeof w->first_unfollowed, "%.200s -> %.200s: %s", dir,
                     target, why);
        } else {
            snprintf(w->first_unfollowed, sizeof w->first_unfollowed, "%s: %s", dir, why);
        }
    }
    return 1;
}

/* Every image file below `dir` (a class folder or one inside it). */
static int walk(walker *w, const char *dir, const struct stat *dst)
{
    if (unfollowed(w, dir, dst, w->depth == 0))
        return 0;
    if (w->depth == WALK_MAX_DEPTH) {
        note_skip(w, dir, "folders nested too deep");
        return 0;
    }
    dirset_add(&w->visited, dst->st_dev, dst->st_ino);
    w->depth++;
    size_t n;
    char **names = list_dir(dir, &n, w->e);
    int rc = names ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        char *path = join(dir, names[i]);
        struct stat st;
        if (stat(path, &st) != 0) {
            note_skip(w, path, errno == ENOENT ? "dangling symlink" : strerror(errno));
        } else if (S_ISDIR(st.st_mode)) {
            rc = walk(w, path, &st);
        } else if (!is_image_name(names[i])) {
            note_skip(w, path, "not an image file name");
        } else {
            if (w->n == w->cap) {
                w->cap = w->cap ? w->cap * 2 : 1024;
                w->files = xrealloc(w->files, w->cap * sizeof *w->files);
            }
            w->files[w->n].dir = xstrdup(dir);
            w->files[w->n].path = path;
            w->n++;
            path = NULL;
        }
        free(path);
    }
    free_names(names, n);
    w->depth--;
    return rc;
}

static int cmp_found(const void *a, const void *b)
{
    const found *x = a, *y = b;
    int c = strcmp(x->dir, y->dir);
    return c ? c : strcmp(x->path, y->path);
}

static void found_free(walker *w)
{
    for (size_t i = 0; i < w->n; i++) {
        free(w->files[i].dir);
        free(w->files[i].path);
    }
    free(w->files);
    w->files = NULL;
    w->n = w->cap = 0;
}

/* The class folders of the root, sorted; the rest of the root is noted. */
static char **class_folders(walker *w, size_t *nclasses)
{
    size_t n;
    char **names = list_dir(w->root, &n, w->e);
    if (!names)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char *path = join(w->root, names[i]);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
            dirset_add(&w->visited, st.st_dev, st.st_ino);
            names[k++] = names[i];
        } else {
            note_skip(w, path, "not in a class folder");
            free(names[i]);
        }
        free(path);
    }
    *nclasses = k;
    return names;
}

/* Pack the found files of every class into ds's two flat allocations. */
static void pack(dataset *ds, found *files, const uint32_t *label, size_t n, char **classes,
                 size_t nclasses)
{
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += strlen(files[i].path) + 1;
    for (size_t c = 0; c < nclasses; c++)
        bytes += strlen(classes[c]) + 1;
    ds->strs = xmalloc(bytes);
    ds->rows = xmalloc(n * sizeof(dataset_row) + nclasses * sizeof(uint64_t));
    ds->class_names = (uint64_t *)(ds->rows + n);
    size_t off = 0;
    uint64_t h = 0x666f6c64;
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(files[i].path) + 1;
        memcpy(ds->strs + off, files[i].path, l);
        ds->rows[i].path = off;
        ds->rows[i].label = (int32_t)label[i];
        ds->rows[i].line = (uint32_t)(i + 1); /* the sample's position, for order only */
        h = hash64(files[i].path, l, h);
        h = hash64(&label[i], sizeof label[i], h);
        off += l;
    }
    for (size_t c = 0; c < nclasses; c++) {
        size_t l = strlen(classes[c]) + 1;
        memcpy(ds->strs + off, classes[c], l);
        ds->class_names[c] = off;
        off += l;
    }
    ds->strs_len = off;
    ds->n = (uint32_t)n;
    ds->nclasses = (uint32_t)nclasses;
    ds->names = 1;
    ds->folder = 1;
    ds->content_hash = h;
}

int dataset_folder_load(dataset *ds, const char *root, const csv_opts *o, errbuf *e)
{
    memset(ds, 0, sizeof *ds);
    walker w = {.root = root, .e = e};
    note_root_and_above(&w);
    size_t nclasses = 0;
    char **classes = class_folders(&w, &nclasses);
    if (!classes) {
        free(w.above.slot);
        free(w.visited.slot);
        return -1;
    }
    int rc = -1;
    uint32_t *label = NULL;
    size_t lab_cap = 0;
    if (nclasses == 0) {
        errf(e, "%s: no class folders (a data folder holds one sub-folder of images per class)",
             root);
        goto out;
    }
    for (size_t c = 0; c < nclasses; c++) {
        char *dir = join(root, classes[c]);
        struct stat st;
        size_t before = w.n;
        int wr = stat(dir, &st) == 0 ? walk(&w, dir, &st) : errf(e, "%s: %s", dir, strerror(errno));
        if (wr == 0 && w.n == before)
            wr = errf(
                e,
                "%s: no image files in this class folder (extensions: .jpg .jpeg .png .ppm .bmp "
                ".pgm .tif .tiff .webp)",
                dir);
        free(dir);
        if (wr != 0)
            goto out;
        qsort(w.files + before, w.n - before, sizeof *w.files, cmp_found);
        if (w.n > lab_cap) {
            lab_cap = w.cap;
            label = xrealloc(label, lab_cap * sizeof *label);
        }
        for (size_t i = before; i < w.n; i++)
            label[i] = (uint32_t)c;
        if (w.n >= UINT32_MAX - 1) {
            errf(e, "%s: too many images (limit %u)", root, UINT32_MAX - 1);
            goto out;
        }
    }
    pack(ds, w.files, label, w.n, classes, nclasses);
    ds->csv_path = xstrdup(root);
    ds->skipped_files = w.skipped;
    if (w.skipped && o && o->warn) {
        char a[ESC_MAX], b[ESC_MAX];
        fprintf(o->warn,
                "train: note: %s: skipped %u file%s that %s in a class folder (first: %s)\n",
                esc_path(root, a, sizeof a), w.skipped, w.skipped == 1 ? "" : "s",
                w.skipped == 1 ? "is not an image" : "are not images",
                esc_path(w.first_skipped, b, sizeof b));
    }
    if (w.unfollowed && o && o->warn) {
        char a[ESC_MAX], b[ESC_MAX];
        fprintf(o->warn,
                "train: note: %s: did not follow %u symlinked folder%s leading back into the data "
                "(first: %s)\n",
                esc_path(root, a, sizeof a), w.unfollowed, w.unfollowed == 1 ? "" : "s",
                esc_path(w.first_unfollowed, b, sizeof b));
    }
    rc = 0;
out:
    free(w.above.slot);
    free(w.visited.slot);
    free_names(classes, nclasses);
    free(label);
    found_free(&w);
    return rc;
}

/* The message carries paths (the image code's messages start with one):
 * control bytes escaped (esc_path), whoever prints it. */
const char *dataset_row_message(const dataset *ds, uint32_t i, const char *msg, char *buf,
                                size_t len)
{
    char raw[2 * ERR_MAX + 64];
    if (ds->members) { /* `SHARD: member NAME` is the location */
        char where[ERR_MAX];
        img_src src;
        dataset_src(ds, i, &src, where, sizeof where);
        size_t n = strlen(where);
        if (strncmp(msg, where, n) == 0 && (msg[n] == ':' || msg[n] == ' ' || msg[n] == '\0'))
            snprintf(raw, sizeof raw, "%s", msg);
        else
            snprintf(raw, sizeof raw, "%s: %s", where, msg);
    } else if (!ds->folder) {
        snprintf(raw, sizeof raw, "%s:%u: %s%s", ds->csv_path, ds->rows[i].line, msg,
                 !ds->had_header && ds->rows[i].line == 1
                     ? " (line 1 was read as data: if it is a header, give --header)"
                     : "");
    } else {
        const char *path = dataset_path(ds, i);
        size_t n = strlen(path);
        if (strncmp(msg, path, n) == 0 && (msg[n] == ':' || msg[n] == ' ' || msg[n] == '\0'))
            snprintf(raw, sizeof raw, "%s", msg);
        else
            snprintf(raw, sizeof raw, "%s: %s", path, msg);
    }
    return esc_path(raw, buf, len);
}
