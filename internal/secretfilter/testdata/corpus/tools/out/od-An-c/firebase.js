   c   o   n   s   t       f   i   r   e   b   a   s   e   C   o
   n   f   i   g       =       {  \n           a   p   i   K   e
   y   :       "   A   I   z   a   c   b   V   Z   g   C   Q   b
   A   I   B   g   o   l   b   C   D   x   G   G   Y   d   y   S
   j   v   k   v   _   I   z   q   k   z   g   "   ,  \n        
   a   u   t   h   D   o   m   a   i   n   :       "   a   c   m
   e   -   p   r   o   d   .   f   i   r   e   b   a   s   e   a
   p   p   .   c   o   m   "   ,  \n   }   ;  \n
