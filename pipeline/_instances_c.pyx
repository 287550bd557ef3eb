# cython: language_level=3
"""The compiled `pipeline._instances.new_instance` (that module says what it does and why).

It allocates the object with the type's generic allocator (what ``object.__new__`` ends in for a pydantic
model, which defines no ``__new__``), sets its ``__dict__`` and stores the three slots directly at the
offsets their member descriptors name. The offsets are read from `BaseModel` at import; a `BaseModel`
whose state is not held in those slots makes the import fail, and the Python build is used instead.
"""

from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF

from types import MemberDescriptorType

from pydantic import BaseModel


cdef extern from "Python.h":
    ctypedef struct PyMemberDef:
        Py_ssize_t offset
    ctypedef struct PyMemberDescrObject:
        PyMemberDef* d_member
    object PyType_GenericAlloc(object cls, Py_ssize_t items)
    int PyObject_GenericSetDict(object instance, object value, void* context) except -1
    int PyType_IsSubtype(PyTypeObject* a, PyTypeObject* b)


cdef Py_ssize_t _slot_offset(str name) except -1:
    descriptor = BaseModel.__dict__.get(name)
    if type(descriptor) is not MemberDescriptorType:
        raise ImportError(f"pydantic's BaseModel keeps {name} elsewhere than in a slot")
    return (<PyMemberDescrObject*><PyObject*>descriptor).d_member.offset


cdef Py_ssize_t _FIELDS_SET = _slot_offset("__pydantic_fields_set__")
cdef Py_ssize_t _EXTRA = _slot_offset("__pydantic_extra__")
cdef Py_ssize_t _PRIVATE = _slot_offset("__pydantic_private__")
if "__dict__" not in BaseModel.__slots__ or "__new__" in BaseModel.__dict__:
    raise ImportError("pydantic's BaseModel is not built as this module assumes")


cdef inline void _store(object instance, Py_ssize_t offset, object value):
    # The slot of a new object is empty (NULL): nothing to release.
    Py_INCREF(value)
    (<PyObject**>((<char*><PyObject*>instance) + offset))[0] = <PyObject*>value


def new_instance(cls, dict values not None, fields_set, extra):
    # A `dict` argument is checked exactly (no subclass); a model class's type is its metaclass.
    if not isinstance(cls, type) or not PyType_IsSubtype(<PyTypeObject*>cls, <PyTypeObject*>BaseModel):
        raise TypeError("new_instance builds pydantic models")
    if extra is not None and type(extra) is not dict:
        raise TypeError("extra is a dict or None")
    instance = PyType_GenericAlloc(cls, 0)
    PyObject_GenericSetDict(instance, values, NULL)
    _store(instance, _FIELDS_SET, set(fields_set))  # the instance's own set
    _store(instance, _EXTRA, extra)
    _store(instance, _PRIVATE, None)
    return instance
