/*
 * lib/formats/safetensors.h - Hugging Face's safetensors files, read by byte range
 * and written atomically.
 *
 * The format (github.com/huggingface/safetensors, "Format"):
 *
 *   8 bytes   N, the header's length, unsigned little-endian
 *   N bytes   a JSON object: tensor name -> {"dtype": "F32", "shape": [2, 3],
 *             "data_offsets": [BEGIN, END]}, and optionally "__metadata__":
 *             {string: string}; it starts with '{' and may end in spaces
 *   the rest  the data section; BEGIN and END are byte offsets into it,
 *             each tensor row-major and little-endian
 *
 * A file comes from the outside world, so st_open checks everything before
 * anything is used, and refuses (naming the file, the tensor when there is
 * one, and what is wrong):
 *   - a header length beyond the file or above ST_MAX_HEADER (100 MB, the
 *     limit of the reference implementation), a header that is not a JSON
 *     object, a name given twice, a name that is empty or holds a control
 *     character (it would reach a terminal through a message);
 *   - a dtype other than F32, BF16 and F16 (I64, F64, F8_E4M3, ... are
 *     refused by name), a shape that is not a list of at most ST_MAX_DIMS
 *     integers >= 0 or whose byte count does not fit in 63 bits;
 *   - data_offsets that are not two integers BEGIN <= END within the data
 *     section, END - BEGIN other than the shape's byte count, two tensors
 *     that overlap, bytes of the data section that no tensor covers (the
 *     reference implementation refuses such holes too: a file with hidden
 *     bytes could be two formats at once).
 *
 * Reading never loads a file whole: every read is a pread of the bytes
 * asked for, so a tensor-parallel or pipeline rank reads only its slice of
 * each tensor (st_read_rows, st_read_block). BF16 and F16 are converted to
 * fp32 exactly (every BF16 and F16 value is an fp32 value: F16 subnormals,
 * infinities and NaN payloads included).
 *
 * A model of several files (transformers' save_pretrained shards anything
 * above 5 GB by default) comes with "model.safetensors.index.json":
 * {"metadata": {...}, "weight_map": {tensor name: file name}}, the files
 * beside it. st_open_index opens the files it names as one set; a tensor
 * name found in two files, a file name that is not a plain name beside the
 * index, and an entry whose file does not hold the tensor are refused.
 *
 * The writer writes fp32 tensors as F32 or BF16 (rounded to nearest, ties
 * to even, as torch's .to(torch.bfloat16)), the header's keys sorted, padded
 * with spaces so that the data section starts at a multiple of 8 bytes (the
 * format's recommendation), tensors in name order without gaps, through a
 * temporary file renamed over the target (lib/io/atomic_file.h).
 */
#ifndef STORK_LIB_SAFETENSORS_H
#define STORK_LIB_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define ST_MAX_HEADER 100000000ULL
#define ST_MAX_DIMS 8

enum st_dtype { ST_F32, ST_BF16, ST_F16 };

/* One tensor of an open set; owned by the set. */
struct st_tensor {
	const char *name;
	enum st_dtype dtype;
	int ndim;                        /* 0: a scalar (one element) */
	int64_t shape[ST_MAX_DIMS];
	int64_t nelem;                   /* product of shape */
	uint64_t offset;                 /* of its first byte in its file */
	int file;                        /* which file of the set holds it */
};

/* An open file or set of files (opaque). */
struct safetensors;

/* "F32", "BF16", "F16". */
const char *st_dtype_name(enum st_dtype t);

/* Bytes of one element: 4 or 2. */
size_t st_dtype_size(enum st_dtype t);

/* Open one .safetensors file and check its header (see above). NULL with
 * "PATH: what" (and the tensor's name where one is at fault) in err. */
struct safetensors *st_open(const char *path, char *err, size_t errlen);

/* Open the files a model.safetensors.index.json names, as one set. */
struct safetensors *st_open_index(const char *index_path, char *err, size_t errlen);

/* A Hugging Face model directory: DIR/model.safetensors.index.json when it
 * exists, else DIR/model.safetensors. */
struct safetensors *st_open_dir(const char *dir, char *err, size_t errlen);

/* Close the files and free everything; NULL is allowed. */
void st_close(struct safetensors *st);

/* What messages call the set: the file, or the index of a sharded set. */
const char *st_name(const struct safetensors *st);

/* Tensors of the set, sorted by name: st_tensor_at(st, 0 .. st_count - 1). */
size_t st_count(const struct safetensors *st);
const struct st_tensor *st_tensor_at(const struct safetensors *st, size_t i);

/* The tensor called name, or NULL. */
const struct st_tensor *st_find(const struct safetensors *st, const char *name);

/* The path of the file that holds t. */
const char *st_file_of(const struct safetensors *st, const struct st_tensor *t);

/* The value of key in the file's "__metadata__" (the first file's, for a
 * set), or NULL. */
const char *st_metadata(const struct safetensors *st, const char *key);

/*
 * The tensor called name, when it has the ndim dimensions in shape. NULL
 * with a message otherwise: "NAME: not in FILE", or "NAME in FILE is [4, 8],
 * SOURCE says [8, 4]" where source names what the expected shape comes from
 * (e.g. "DIR/config.json").
 */
const struct st_tensor *st_expect(const struct safetensors *st, const char *name, int ndim,
				  const int64_t *shape, const char *source, char *err,
				  size_t errlen);

/* Read all of t into out (t->nelem floats). 0, or -1 with err naming the
 * file and the tensor (a file that shrank since st_open, an I/O error). */
int st_read(const struct safetensors *st, const struct st_tensor *t, float *out, char *err,
	    size_t errlen);

/* Elements [first, first + count) of t in row-major order into out. */
int st_read_range(const struct safetensors *st, const struct st_tensor *t, int64_t first,
		  int64_t count, float *out, char *err, size_t errlen);

/* Rows [row0, row0 + nrows) of the first dimension of t (ndim >= 1): what
 * a rank reads of a tensor split by rows, one pread. */
int st_read_rows(const struct safetensors *st, const struct st_tensor *t, int64_t row0,
		 int64_t nrows, float *out, char *err, size_t errlen);

/* Of a 2-D tensor, columns [col0, col0 + ncols) of rows [row0, row0 +
 * nrows), into out as an nrows x ncols row-major block: what a rank reads
 * of a tensor split by columns (one pread per row, only those bytes). */
int st_read_block(const struct safetensors *st, const struct st_tensor *t, int64_t row0,
		  int64_t nrows, int64_t col0, int64_t ncols, float *out, char *err,
		  size_t errlen);

/* One tensor to write: data holds the product of shape floats (NULL only
 * when that product is 0). */
struct st_out {
	const char *name;
	int ndim;
	int64_t shape[ST_MAX_DIMS];
	const float *data;
};

/*
 * Write the n tensors of t to path as dtype (ST_F32 or ST_BF16), replacing
 * any file there atomically. meta is NULL or a NULL-terminated list of key,
 * value strings for "__metadata__"; "format": "pt" is written unless meta
 * sets "format" (transformers' from_pretrained refuses a file without it).
 * 0, or -1 with err naming path and, where one is at fault, the tensor (a
 * name given twice, an empty name, a negative size).
 */
int st_write(const char *path, const struct st_out *t, size_t n, enum st_dtype dtype,
	     const char *const *meta, char *err, size_t errlen);

/* The conversions, exact from 16 bits to 32, and round to nearest even
 * (NaN stays NaN, its sign kept) from fp32 to bfloat16. */
float st_bf16_to_f32(uint16_t h);
float st_f16_to_f32(uint16_t h);
uint16_t st_f32_to_bf16(float f);

#endif
